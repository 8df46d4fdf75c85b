package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/plugins/resources/internal/secretfile"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

type settings struct {
	Dir string `json:"dir,omitempty"`
}

// provider serves the secret type from an age-encrypted store on local disk.
type provider struct {
	mu    sync.Mutex // one provision or deprovision at a time: versions are numbered in order
	store *store
}

// Configure opens the store, creating its age identity on first start.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return sdk.Invalid("settings", "settings are not an object: %v", err)
	}
	st, err := open(s.Dir)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.store = st
	return nil
}

func open(dir string) (*store, error) {
	if dir == "" {
		dir = sdk.DataDir()
	}
	if dir == "" {
		return nil, sdk.Invalid("settings/dir", "no directory for the secrets: set dir, or run the plugin under the host, which gives it a data directory (%s)", sdk.DataDirEnv)
	}
	id, err := loadOrCreateIdentity(dir)
	if err != nil {
		return nil, err
	}
	hclog.Default().Info("secret store open", "dir", dir, "recipient", id.Recipient().String())
	return &store{dir: dir, id: id}, nil
}

// ready returns the store, opening it in the data directory if Configure never ran.
func (p *provider) ready() (*store, error) {
	if p.store == nil {
		st, err := open("")
		if err != nil {
			return nil, err
		}
		p.store = st
	}
	return p.store, nil
}

// Provision stores each file of the request, keeping the versions that still stand, and
// returns a reference to each. The values stay here: Result.Secrets is empty.
func (p *provider) Provision(_ context.Context, req resource.Request) (resource.Result, error) {
	files, err := secretfile.Files(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.ready()
	if err != nil {
		return resource.Result{}, err
	}
	stored := map[string]secretfile.Stored{}
	for _, f := range files {
		s, err := p.reconcile(st, req, f)
		if err != nil {
			return resource.Result{}, err
		}
		stored[f.Name] = s
	}
	data, err := secretfile.Result(req.Tenant, req.Instance, files, stored)
	if err != nil {
		return resource.Result{}, err
	}
	return resource.Result{Data: data}, nil
}

func (p *provider) reconcile(st *store, req resource.Request, f secretfile.File) (secretfile.Stored, error) {
	top, err := st.latest(req.Tenant, req.Instance, f.Name)
	if err != nil {
		return secretfile.Stored{}, err
	}
	var latest *secretfile.Stored
	if top > 0 {
		v, err := st.read(req.Tenant, req.Instance, f.Name, top)
		if err != nil {
			return secretfile.Stored{}, err
		}
		latest = &secretfile.Stored{Version: top, Generator: st.generator(req.Tenant, req.Instance, f.Name), Value: v}
	}
	value, err := secretfile.Want(f, latest, req.Secrets)
	if err != nil {
		return secretfile.Stored{}, err
	}
	if value == nil {
		return *latest, nil
	}
	next := secretfile.Stored{Version: top + 1, Generator: f.Generator(), Value: value}
	if err := st.write(req.Tenant, req.Instance, f.Name, next.Version, next.Generator, value); err != nil {
		return secretfile.Stored{}, err
	}
	hclog.Default().Info("secret version stored", "tenant", req.Tenant, "instance", req.Instance, "file", f.Name, "version", next.Version, "generator", next.Generator)
	return next, nil
}

// Deprovision removes the instance's secrets, all versions; with Retain it removes nothing.
func (p *provider) Deprovision(_ context.Context, req resource.DeprovisionRequest) error {
	if req.Retain {
		hclog.Default().Info("secrets retained", "tenant", req.Tenant, "instance", req.Instance)
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.ready()
	if err != nil {
		return err
	}
	if err := st.remove(req.Tenant, req.Instance); err != nil {
		return err
	}
	hclog.Default().Info("secrets removed", "tenant", req.Tenant, "instance", req.Instance)
	return nil
}

// Reveal gives the value a reference names, only to the instance that owns it; any other
// reference, existing or not, gets the same not-found answer.
func (p *provider) Reveal(_ context.Context, tenant, instance, reference string) ([]byte, error) {
	ref, ok := secretfile.ParseRef(reference)
	if !ok || ref.Tenant != tenant || ref.Instance != instance {
		return nil, secretfile.NotFound(tenant, instance, reference)
	}
	p.mu.Lock()
	st, err := p.ready()
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	v, err := st.read(ref.Tenant, ref.Instance, ref.File, ref.Version)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, secretfile.NotFound(tenant, instance, reference)
	}
	return v, err
}

var (
	_ resource.Provider = (*provider)(nil)
	_ resource.Revealer = (*provider)(nil)
	_ sdk.Configurer    = (*provider)(nil)
)
