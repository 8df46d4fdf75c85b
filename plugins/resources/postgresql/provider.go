package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// provider serves the postgresql resource type on the configured server.
type provider struct {
	mu      sync.Mutex
	srv     *server
	cluster *cluster // nil in shared mode
	allowed []string
}

// current returns the server and allowed extensions of the latest settings.
func (p *provider) current() (*server, []string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return nil, nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first request")
	}
	return p.srv, p.allowed, nil
}

// swap installs new settings, closing the old server and stopping a cluster no longer used.
func (p *provider) swap(srv *server, cl *cluster, allowed []string) {
	p.mu.Lock()
	oldSrv, oldCluster := p.srv, p.cluster
	p.srv, p.cluster, p.allowed = srv, cl, allowed
	p.mu.Unlock()
	if oldSrv != nil && oldSrv != srv {
		oldSrv.close()
	}
	if oldCluster != nil && oldCluster != cl {
		oldCluster.stop()
	}
}

// close releases the server and stops the managed cluster.
func (p *provider) close() { p.swap(nil, nil, nil) }

// names returns the role and database name of an instance, and the marker its comments
// carry.
func names(tenant, instance string) (name, marker string, err error) {
	name = tenant + "-" + instance
	if len(name) > 63 {
		return "", "", sdk.Invalid("instance", "the role and database name %q is %d bytes, and PostgreSQL allows 63: shorten the tenant (%d bytes) or the instance (%d bytes)", name, len(name), len(tenant), len(instance))
	}
	return name, fmt.Sprintf("fedhost tenant=%s instance=%s", tenant, instance), nil
}

// parseRequest reads a request and checks its extensions against the allowed list.
func parseRequest(spec json.RawMessage, allowed []string) (contract.PostgreSQLRequest, error) {
	var r contract.PostgreSQLRequest
	if len(spec) > 0 {
		if err := json.Unmarshal(spec, &r); err != nil {
			return r, sdk.Invalid("request", "the request is not a postgresql request: %v", err)
		}
	}
	for i, ext := range r.Extensions {
		if !slices.Contains(allowed, ext) {
			return r, sdk.Invalid(fmt.Sprintf("request/extensions/%d", i), "extension %q is not offered here: the allowed extensions are %v", ext, allowed)
		}
	}
	return r, nil
}

// Validate checks the extensions of a request against the allowed list.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	p.mu.Lock()
	allowed := p.allowed
	p.mu.Unlock()
	if allowed == nil {
		allowed = defaultExtensions
	}
	_, err := parseRequest(spec, allowed)
	return err
}

// Provision creates or adopts the role and database of the instance, and reconciles
// their password, privileges and extensions.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	srv, allowed, err := p.current()
	if err != nil {
		return resource.Result{}, err
	}
	name, marker, err := names(req.Tenant, req.Instance)
	if err != nil {
		return resource.Result{}, err
	}
	spec, err := parseRequest(req.Spec, allowed)
	if err != nil {
		return resource.Result{}, err
	}
	password, err := passwordOf(req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	verifier, err := scramVerifier(password)
	if err != nil {
		return resource.Result{}, err
	}
	if err := srv.ensure(ctx, name, marker, verifier, spec.Extensions); err != nil {
		return resource.Result{}, err
	}
	data, err := json.Marshal(srv.result(name))
	if err != nil {
		return resource.Result{}, err
	}
	return resource.Result{Data: data, Secrets: map[string][]byte{passwordKey: []byte(password)}}, nil
}

// Deprovision drops the role and database, or with Retain keeps both and takes away
// the role's login and its right to connect.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	srv, _, err := p.current()
	if err != nil {
		return err
	}
	name, marker, err := names(req.Tenant, req.Instance)
	if err != nil {
		return err
	}
	if req.Retain {
		return srv.disable(ctx, name, marker)
	}
	return srv.drop(ctx, name, marker)
}

// Status reports ready when the database exists and its role may log in.
func (p *provider) Status(ctx context.Context, req resource.Request) (resource.Status, error) {
	srv, _, err := p.current()
	if err != nil {
		return resource.Status{}, err
	}
	name, marker, err := names(req.Tenant, req.Instance)
	if err != nil {
		return resource.Status{}, err
	}
	conn, err := srv.acquire(ctx)
	if err != nil {
		return resource.Status{}, err
	}
	defer conn.Release()
	st, err := srv.lookup(ctx, conn, name)
	if err != nil {
		return resource.Status{}, err
	}
	if err := st.owned(name, marker); err != nil {
		return resource.Status{}, err
	}
	switch {
	case !st.db:
		return resource.Status{State: "missing", Message: fmt.Sprintf("database %s does not exist", name)}, nil
	case !st.roleCanLogin:
		return resource.Status{State: "missing", Message: fmt.Sprintf("database %s is kept from a deprovision with retain, and role %s may not log in: provision again to restore access", name, name)}, nil
	}
	data, err := json.Marshal(srv.result(name))
	if err != nil {
		return resource.Status{}, err
	}
	return resource.Status{State: "ready", Data: data}, nil
}

var (
	_ resource.Provider       = (*provider)(nil)
	_ resource.Validator      = (*provider)(nil)
	_ resource.StatusReporter = (*provider)(nil)
	_ sdk.Configurer          = (*provider)(nil)
)
