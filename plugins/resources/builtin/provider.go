package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// Names of the secrets a result hands the host, and the host hands back.
const (
	clientSecretKey = "client-secret"
	signingKeysKey  = "signing-keys"
)

// provider serves the oidc type: the deployments' records and the listener of their
// issuers.
type provider struct {
	now func() time.Time
	log hclog.Logger

	mu      sync.RWMutex
	cfg     config
	tenants map[string]*tenant
	srv     *server
	stop    chan struct{}
}

func newProvider() *provider {
	return &provider{now: time.Now, log: hclog.Default(), tenants: map[string]*tenant{}}
}

// Configure takes the settings, loads the deployments kept in the data dir and starts
// the listener (again, when listen changed).
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseSettings(raw)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil && p.cfg.dir == cfg.dir && p.cfg.listen == cfg.listen {
		p.cfg = cfg
		p.srv.trustedProxies = cfg.trusted
		for _, t := range p.tenants {
			t.setRotation(cfg.rotation)
		}
		return nil
	}
	if err := os.MkdirAll(cfg.dir, 0o700); err != nil {
		return sdk.Invalid("settings/dir", "making the data directory: %v", err)
	}
	tenants, err := loadTenants(cfg.dir, cfg.rotation, p.now)
	if err != nil {
		return sdk.Unavailable("reading the deployments kept in %s: %v", cfg.dir, err)
	}
	ln, err := listen(cfg)
	if err != nil {
		return err
	}
	p.closeLocked()
	p.cfg, p.tenants = cfg, tenants
	p.srv = &server{
		trustedProxies: cfg.trusted, lookup: p.lookup, now: p.now, log: p.log, ln: ln,
		users: newFailureLimiter(userFailureEvery, userFailureBurst, maxLimiterKeys),
		addrs: newFailureLimiter(addrFailureEvery, addrFailureBurst, maxLimiterKeys),
	}
	p.srv.serve()
	p.stop = make(chan struct{})
	go p.sweep(p.srv, p.stop)
	p.log.Info("serving the issuers", "listen", ln.Addr().String(), "deployments", len(tenants))
	return nil
}

// listen opens the configured address; port 0 is chosen once and kept in the data dir,
// so that the front door's routes stay valid across restarts.
func listen(cfg config) (net.Listener, error) {
	host, port, _ := net.SplitHostPort(cfg.listen)
	if port != "0" {
		ln, err := net.Listen("tcp", cfg.listen)
		if err != nil {
			return nil, sdk.Unavailable("listening on %s (settings/listen): %v", cfg.listen, err)
		}
		return ln, nil
	}
	file := filepath.Join(cfg.dir, "listen")
	if b, err := os.ReadFile(file); err == nil {
		kept := strings.TrimSpace(string(b))
		if h, _, err := net.SplitHostPort(kept); err == nil && h == host {
			ln, err := net.Listen("tcp", kept)
			if err != nil {
				return nil, sdk.Unavailable("listening on %s, the address kept in %s: %v (free the port, or remove the file to have another chosen and route the front door to it)", kept, file, err)
			}
			return ln, nil
		}
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, sdk.Unavailable("listening on %s (settings/listen): %v", cfg.listen, err)
	}
	if err := atomicfile.Write(file, []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

func (p *provider) sweep(s *server, stop chan struct{}) {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := p.now()
		s.users.sweep(now)
		s.addrs.sweep(now)
		p.mu.RLock()
		tenants := make([]*tenant, 0, len(p.tenants))
		for _, t := range p.tenants {
			tenants = append(tenants, t)
		}
		p.mu.RUnlock()
		for _, t := range tenants {
			t.sweep()
		}
	}
}

func (p *provider) closeLocked() {
	if p.srv != nil {
		close(p.stop)
		p.srv.close()
		p.srv = nil
	}
	for _, t := range p.tenants {
		t.directory().close()
	}
}

func (p *provider) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
}

// lookup is the deployment whose issuer is at host.
func (p *provider) lookup(host string) *tenant {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, t := range p.tenants {
		if t.host() == host {
			return t
		}
	}
	return nil
}

func (p *provider) ready() (*server, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.srv == nil {
		return nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first request")
	}
	return p.srv, nil
}

// Validate checks a request without changing anything.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	_, err := parseRequest(spec)
	return err
}

func clientID(tenant, instance string) string { return tenant + "-" + instance }

// secretOf is the client secret the host hands back, or a new one.
func secretOf(secrets map[string][]byte) (string, error) {
	if s, ok := secrets[clientSecretKey]; ok {
		if len(s) < 32 || len(s) > 128 || strings.TrimSpace(string(s)) != string(s) {
			return "", sdk.Invalid("secrets/"+clientSecretKey, "the stored client secret is not 32 to 128 characters without spaces at its ends: remove the secret to have a new one made")
		}
		return string(s), nil
	}
	b := make([]byte, 32)
	if _, err := cryptoRand(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Provision registers or reconciles the client <tenant>-<instance> at the deployment's
// issuer, with the deployment's directory, and returns the client's secret and the
// deployment's signing keys for the host to keep.
func (p *provider) Provision(_ context.Context, req resource.Request) (resource.Result, error) {
	srv, err := p.ready()
	if err != nil {
		return resource.Result{}, err
	}
	r, err := parseRequest(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	if r.Issuer == "" {
		return resource.Result{}, sdk.Invalid("request/issuer", "the host sets the deployment's issuer URL: provision through the host, which adds it")
	}
	if r.Directory == nil {
		return resource.Result{}, sdk.Invalid("request/directory", "the host sets the deployment's directory (its ldap resource): give the deployment an ldap resource")
	}
	host, _ := issuerHost(r.Issuer)
	bindPassword, ok := req.Secrets[r.Directory.BindPassword.Secret]
	if !ok || len(bindPassword) == 0 || len(bindPassword) > 1024 {
		return resource.Result{}, sdk.Invalid("secrets/"+r.Directory.BindPassword.Secret, "the host gives the directory's bind password under the name its result names; it is missing")
	}
	secret, err := secretOf(req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	var given []signingKey
	if b, ok := req.Secrets[signingKeysKey]; ok {
		if given, err = decodeKeySet(b); err != nil {
			return resource.Result{}, sdk.Invalid("secrets/"+signingKeysKey, "the stored signing keys are unusable (%v): remove the secret to have new keys made", err)
		}
	}
	scopes := r.Scopes
	if len(scopes) == 0 {
		scopes = offeredScopes
	}
	if !slices.Contains(scopes, "openid") {
		scopes = append([]string{"openid"}, scopes...)
	}
	sum := sha256Sum(secret)
	client := &clientRecord{
		ID: clientID(req.Tenant, req.Instance), Name: r.Name, SecretHash: sum[:],
		RedirectURIs: r.RedirectURIs, Scopes: scopes, AllowedGroups: r.AllowedGroups,
	}
	dir := directoryConfig{URL: r.Directory.URL, UsersDN: r.Directory.UsersDN, GroupsDN: r.Directory.GroupsDN, BindDN: r.Directory.BindDN, BindPassword: string(bindPassword)}

	keys, err := p.register(req.Tenant, host, r.Issuer, dir, client, given)
	if err != nil {
		return resource.Result{}, err
	}
	data, err := json.Marshal(contract.OIDCResult{
		Issuer: r.Issuer, ClientID: client.ID, ClientSecret: contract.SecretRef{Secret: clientSecretKey}, Upstream: srv.upstream(),
	})
	if err != nil {
		return resource.Result{}, err
	}
	p.log.Info("client registered", "tenant", req.Tenant, "client", client.ID, "issuer", r.Issuer, "redirect_uris", len(client.RedirectURIs), "allowed_groups", len(client.AllowedGroups))
	return resource.Result{Data: data, Secrets: map[string][]byte{clientSecretKey: []byte(secret), signingKeysKey: keys}}, nil
}

// register finds or makes the deployment's record and keeps the client in it, all under
// the provider's lock so that no two deployments can take one issuer host; a host
// another deployment holds is refused.
func (p *provider) register(name, host, issuer string, dir directoryConfig, c *clientRecord, given []signingKey) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for other, t := range p.tenants {
		if other != name && t.host() == host {
			return nil, sdk.Invalid("request/issuer", "another deployment's issuer is at this host name already: give each deployment its own domain")
		}
	}
	t, ok := p.tenants[name]
	if !ok {
		path := filepath.Join(p.cfg.dir, "tenants", name+".json")
		t = newTenant(path, tenantRecord{Tenant: name}, p.cfg.rotation, p.now)
	}
	keys, err := t.register(issuer, dir, c, given)
	if err != nil {
		return nil, fmt.Errorf("keeping the client of %s: %w", name, err)
	}
	p.tenants[name] = t
	return keys, nil
}

// Deprovision removes the client; the deployment's issuer goes with its last client.
func (p *provider) Deprovision(_ context.Context, req resource.DeprovisionRequest) error {
	if _, err := p.ready(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tenants[req.Tenant]
	if !ok {
		return nil
	}
	left, err := t.unregister(clientID(req.Tenant, req.Instance))
	if err != nil {
		return err
	}
	if left == 0 {
		delete(p.tenants, req.Tenant)
		t.directory().close()
		if err := os.Remove(t.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		p.log.Info("issuer removed", "tenant", req.Tenant)
	}
	p.log.Info("client removed", "tenant", req.Tenant, "client", clientID(req.Tenant, req.Instance))
	return nil
}

// Status reports ready when the client is registered.
func (p *provider) Status(_ context.Context, req resource.Request) (resource.Status, error) {
	srv, err := p.ready()
	if err != nil {
		return resource.Status{}, err
	}
	p.mu.RLock()
	t := p.tenants[req.Tenant]
	p.mu.RUnlock()
	id := clientID(req.Tenant, req.Instance)
	if t == nil || t.client(id) == nil {
		return resource.Status{State: "missing", Message: fmt.Sprintf("client %s is not registered: provision again", id)}, nil
	}
	data, err := json.Marshal(contract.OIDCResult{Issuer: t.issuer(), ClientID: id, ClientSecret: contract.SecretRef{Secret: clientSecretKey}, Upstream: srv.upstream()})
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
