package main

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// provider runs the module of a request's type, one run per workspace at a time.
type provider struct {
	now func() time.Time

	mu  sync.Mutex // guards cfg and busy
	cfg *config
	// busy holds a lock per workspace ("tenant/instance") while a run goes on.
	busy map[string]*sync.Mutex
}

func newProvider() *provider { return &provider{now: time.Now, busy: map[string]*sync.Mutex{}} }

// Configure checks the settings: each module's directory, the state backend and the
// terraform binary.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseSettings(raw, sdk.DataDir())
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	names := make([]string, 0, len(cfg.modules))
	for typ := range cfg.modules {
		names = append(names, typ)
	}
	hclog.Default().Info("terraform provider configured", "types", names, "terraform", cfg.terraform)
	return nil
}

func (p *provider) config() *config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// workspace returns the module of typ and takes the workspace's turn; release gives it back.
func (p *provider) workspace(typ, tenant, instance string) (*config, module, func(), error) {
	cfg := p.config()
	if cfg == nil {
		return nil, module{}, nil, sdk.Invalid("settings", "the terraform provider is not configured: name it in a resource block of fedhost.hcl with its modules")
	}
	m, ok := cfg.modules[typ]
	if !ok {
		return nil, module{}, nil, sdk.Invalid("type", "no module answers %s: add modules.%s (the module's directory) to the terraform provider's settings", typ, typ)
	}
	key := tenant + "/" + instance
	p.mu.Lock()
	l, ok := p.busy[key]
	if !ok {
		l = &sync.Mutex{}
		p.busy[key] = l
	}
	p.mu.Unlock()
	l.Lock()
	return cfg, m, l.Unlock, nil
}

// Validate checks that a module answers the type.
func (p *provider) Validate(_ context.Context, typ string, _ json.RawMessage) error {
	cfg := p.config()
	if cfg == nil {
		return sdk.Invalid("settings", "the terraform provider is not configured: name it in a resource block of fedhost.hcl with its modules")
	}
	if _, ok := cfg.modules[typ]; !ok {
		return sdk.Invalid("type", "no module answers %s: add modules.%s (the module's directory) to the terraform provider's settings", typ, typ)
	}
	return nil
}

// Provision plans the module with the request as its variables, refuses a plan that
// would destroy or replace a resource, applies it and returns its outputs as the result.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	cfg, m, release, err := p.workspace(req.Type, req.Tenant, req.Instance)
	if err != nil {
		return resource.Result{}, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	r, err := p.start(ctx, cfg, m, req.Type, req.Tenant, req.Instance, req.Spec, req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	defer r.close()
	changed, err := r.planAndApply(ctx, false)
	if err != nil {
		return resource.Result{}, err
	}
	res, err := r.result(ctx)
	if err != nil {
		return resource.Result{}, err
	}
	hclog.Default().Info("terraform module applied", "tenant", req.Tenant, "instance", req.Instance, "type", req.Type, "changed", changed)
	return res, nil
}

// Deprovision destroys what the module made and forgets the state. With Retain, a module
// that declares a retain variable is applied and destroyed with retain = true, and keeps
// the data itself; one that does not has its state forgotten, nothing destroyed.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	cfg, m, release, err := p.workspace(req.Type, req.Tenant, req.Instance)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	r, err := p.start(ctx, cfg, m, req.Type, req.Tenant, req.Instance, req.Spec, nil)
	if err != nil {
		return err
	}
	defer r.close()
	switch {
	case req.Retain && !r.declaresRetain:
		hclog.Default().Warn("retained: the state is forgotten and nothing destroyed, since the module declares no retain variable", "tenant", req.Tenant, "instance", req.Instance, "type", req.Type)
	case req.Retain:
		if _, err := r.planAndApply(ctx, true); err != nil {
			return err
		}
		if err := r.destroy(ctx, true); err != nil {
			return err
		}
	default:
		if err := r.destroy(ctx, false); err != nil {
			return err
		}
	}
	if err := r.backend.forget(ctx); err != nil {
		return err
	}
	hclog.Default().Info("terraform module destroyed", "tenant", req.Tenant, "instance", req.Instance, "type", req.Type, "retain", req.Retain)
	return nil
}

var (
	_ resource.Provider  = (*provider)(nil)
	_ resource.Validator = (*provider)(nil)
	_ sdk.Configurer     = (*provider)(nil)
)
