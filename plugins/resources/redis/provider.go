package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// provider serves the redis resource type on the configured server.
type provider struct {
	mu  sync.Mutex
	srv *server
}

// current returns the server of the latest settings.
func (p *provider) current() (*server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first request")
	}
	return p.srv, nil
}

// swap installs a new server, closing the old one.
func (p *provider) swap(srv *server) {
	p.mu.Lock()
	old := p.srv
	p.srv = srv
	p.mu.Unlock()
	if old != nil && old != srv {
		old.close()
	}
}

func (p *provider) close() { p.swap(nil) }

// Provision creates or adopts the ACL user of the instance and reconciles its rules and
// password. The request has no fields.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	srv, err := p.current()
	if err != nil {
		return resource.Result{}, err
	}
	i := instance{tenant: req.Tenant, name: req.Instance}
	password, err := passwordOf(req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	if err := srv.ensure(ctx, i, passwordHash(password)); err != nil {
		return resource.Result{}, err
	}
	data, err := json.Marshal(srv.result(i))
	if err != nil {
		return resource.Result{}, err
	}
	hclog.Default().Info("ACL user ready", "user", i.user(), "key_prefix", i.prefix())
	return resource.Result{Data: data, Secrets: map[string][]byte{passwordKey: []byte(password)}}, nil
}

// Deprovision deletes the ACL user and the keys under its prefix, or with Retain only
// the user.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	srv, err := p.current()
	if err != nil {
		return err
	}
	i := instance{tenant: req.Tenant, name: req.Instance}
	deleted, err := srv.remove(ctx, i, req.Retain)
	if err != nil {
		return err
	}
	hclog.Default().Info("ACL user removed", "user", i.user(), "key_prefix", i.prefix(), "keys_kept", req.Retain, "keys_deleted", deleted)
	return nil
}

// Status reports ready when the user exists and is on, missing when it does not.
func (p *provider) Status(ctx context.Context, req resource.Request) (resource.Status, error) {
	srv, err := p.current()
	if err != nil {
		return resource.Status{}, err
	}
	i := instance{tenant: req.Tenant, name: req.Instance}
	u, err := srv.owned(ctx, i)
	if err != nil {
		return resource.Status{}, err
	}
	switch {
	case u == nil:
		return resource.Status{State: "missing", Message: fmt.Sprintf("ACL user %s does not exist on %s", i.user(), srv.address)}, nil
	case !u.on:
		return resource.Status{State: "missing", Message: fmt.Sprintf("ACL user %s is off: provision again to turn it on", i.user())}, nil
	}
	data, err := json.Marshal(srv.result(i))
	if err != nil {
		return resource.Status{}, err
	}
	return resource.Status{State: "ready", Data: data}, nil
}

var (
	_ resource.Provider       = (*provider)(nil)
	_ resource.StatusReporter = (*provider)(nil)
	_ sdk.Configurer          = (*provider)(nil)
)
