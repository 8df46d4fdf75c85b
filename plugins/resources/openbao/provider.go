package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/plugins/resources/internal/secretfile"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

type settings struct {
	Address   string `json:"address"`
	Mount     string `json:"mount,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
}

// provider serves the secret type from an OpenBao KV v2 mount.
type provider struct {
	mu sync.RWMutex
	kv *kv
}

// Configure builds the OpenBao client; it does not call the server, which may be down.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return sdk.Invalid("settings", "settings are not an object: %v", err)
	}
	s.Mount = strings.Trim(s.Mount, "/")
	if s.Mount == "" {
		s.Mount = "secret"
	}
	s.Prefix = strings.Trim(s.Prefix, "/")
	if s.Prefix == "" {
		s.Prefix = "fedhost"
	}
	if s.Token != "" && s.TokenFile != "" {
		return sdk.Invalid("settings/token_file", "set token or token_file, not both")
	}
	token, tokenField := s.Token, "settings/token"
	if s.TokenFile != "" {
		tokenField = "settings/token_file"
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return sdk.Invalid("settings/token_file", "reading the OpenBao token file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return sdk.Invalid("settings/token", "no OpenBao token: set token or token_file (a file that is not empty)")
	}
	k, err := newKV(s.Address, s.Mount, s.Prefix, token, tokenField)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kv = k
	hclog.Default().Info("openbao configured", "address", s.Address, "mount", s.Mount, "prefix", s.Prefix)
	return nil
}

func (p *provider) client() (*kv, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.kv == nil {
		return nil, sdk.Invalid("settings/address", "the provider has no settings: give it address and token or token_file")
	}
	return p.kv, nil
}

// Provision writes a new KV version of each file whose value must change, adopts the
// tenant's entries that exist, and returns a reference to each file's current version.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	files, err := secretfile.Files(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	k, err := p.client()
	if err != nil {
		return resource.Result{}, err
	}
	stored := map[string]secretfile.Stored{}
	for _, f := range files {
		s, err := reconcile(ctx, k, req, f)
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

func reconcile(ctx context.Context, k *kv, req resource.Request, f secretfile.File) (secretfile.Stored, error) {
	path := k.filePath(req.Tenant, req.Instance, f.Name)
	e, err := k.get(ctx, path, 0)
	if err != nil {
		return secretfile.Stored{}, err
	}
	var latest *secretfile.Stored
	cas := 0
	if e != nil {
		cas = e.version
		if !e.deleted {
			if !e.ownedBy(req.Tenant, req.Instance) {
				return secretfile.Stored{}, sdk.Conflict("%s exists in OpenBao but fedhost did not write it for %s/%s: remove it, or give the provider another prefix", k.full(path), req.Tenant, req.Instance)
			}
			v, err := e.value()
			if err != nil {
				return secretfile.Stored{}, sdk.Conflict("%s (version %d) is not a fedhost secret entry: %v", k.full(path), e.version, err)
			}
			latest = &secretfile.Stored{Version: e.version, Generator: e.generator(), Value: v}
		}
	}
	value, err := secretfile.Want(f, latest, req.Secrets)
	if err != nil {
		return secretfile.Stored{}, err
	}
	if value == nil {
		return *latest, nil
	}
	n, err := k.put(ctx, path, cas, req.Tenant, req.Instance, f.Generator(), value)
	if err != nil {
		return secretfile.Stored{}, err
	}
	hclog.Default().Info("secret version stored", "tenant", req.Tenant, "instance", req.Instance, "file", f.Name, "path", k.full(path), "version", n, "generator", f.Generator())
	return secretfile.Stored{Version: n, Generator: f.Generator(), Value: value}, nil
}

// Deprovision deletes the metadata and every version of the instance's entries that
// carry its ownership marker; with Retain it deletes nothing.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	if req.Retain {
		hclog.Default().Info("secrets retained", "tenant", req.Tenant, "instance", req.Instance)
		return nil
	}
	k, err := p.client()
	if err != nil {
		return err
	}
	names, err := k.files(ctx, req.Tenant, req.Instance)
	if err != nil {
		return err
	}
	for _, name := range names {
		path := k.filePath(req.Tenant, req.Instance, name)
		e, err := k.get(ctx, path, 0)
		if err != nil {
			return err
		}
		if e == nil {
			continue
		}
		if !e.deleted && !e.ownedBy(req.Tenant, req.Instance) {
			hclog.Default().Warn("entry left in place: fedhost did not write it", "path", k.full(path), "tenant", req.Tenant, "instance", req.Instance)
			continue
		}
		if err := k.remove(ctx, path); err != nil {
			return err
		}
	}
	hclog.Default().Info("secrets removed", "tenant", req.Tenant, "instance", req.Instance, "entries", len(names))
	return nil
}

// Reveal reads the KV version a reference names, only for the instance that owns it;
// any other reference, existing or not, gets the same not-found answer.
func (p *provider) Reveal(ctx context.Context, tenant, instance, reference string) ([]byte, error) {
	ref, ok := secretfile.ParseRef(reference)
	if !ok || ref.Tenant != tenant || ref.Instance != instance {
		return nil, secretfile.NotFound(tenant, instance, reference)
	}
	k, err := p.client()
	if err != nil {
		return nil, err
	}
	e, err := k.get(ctx, k.filePath(tenant, instance, ref.File), ref.Version)
	if err != nil {
		return nil, err
	}
	if e == nil || e.deleted || !e.ownedBy(tenant, instance) {
		return nil, secretfile.NotFound(tenant, instance, reference)
	}
	v, err := e.value()
	if err != nil {
		return nil, secretfile.NotFound(tenant, instance, reference)
	}
	return v, nil
}

var (
	_ resource.Provider = (*provider)(nil)
	_ resource.Revealer = (*provider)(nil)
	_ sdk.Configurer    = (*provider)(nil)
)
