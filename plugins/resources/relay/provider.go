package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// passwordSecret is the entry of Result.Secrets (and Request.Secrets) holding the
// account's password.
const passwordSecret = "password"

// provider keeps the relay's accounts and runs its listener.
type provider struct {
	mu       sync.Mutex // one change of accounts or settings at a time
	cfg      *config
	accounts *accounts
	relay    *relay
}

// Configure checks the settings, opens the accounts in the data directory and (re)starts
// the listener.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseSettings(raw)
	if err != nil {
		return err
	}
	dir := sdk.DataDir()
	if dir == "" {
		return sdk.Unavailable("the relay has no data directory for its accounts: run the plugin under the host, which gives it one (%s)", sdk.DataDirEnv)
	}
	accts, err := openAccounts(filepath.Join(dir, "accounts.json"))
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.relay != nil {
		p.relay.stop()
		p.relay = nil
	}
	r, err := startRelay(cfg, accts, hclog.Default())
	if err != nil {
		return sdk.Unavailable("%v", err)
	}
	p.cfg, p.accounts, p.relay = cfg, accts, r
	return nil
}

// Validate checks the request.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	from, err := fromAddress(spec)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg != nil {
		return p.checkAllowed(from)
	}
	return nil
}

// Provision makes or keeps the instance's account. The password given back by the host
// is kept; without one (a first provision, or a lost secret) the account gets a new
// password from crypto/rand, which leaves only in Result.Secrets: the relay keeps its
// hash.
func (p *provider) Provision(_ context.Context, req resource.Request) (resource.Result, error) {
	from, err := fromAddress(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return resource.Result{}, err
	}
	if err := p.checkAllowed(from); err != nil {
		return resource.Result{}, err
	}
	password := string(req.Secrets[passwordSecret])
	if !validPassword(password) {
		if password, err = newPassword(); err != nil {
			return resource.Result{}, err
		}
	}
	user := userName(req.Tenant, req.Instance)
	if a, ok := p.accounts.get(user); !ok || a.From != from || !a.matches(password) {
		a, err := newAccount(req.Tenant, req.Instance, from, password)
		if err != nil {
			return resource.Result{}, err
		}
		if err := p.accounts.put(a); err != nil {
			return resource.Result{}, err
		}
		hclog.Default().Info("relay account provisioned", "tenant", req.Tenant, "instance", req.Instance, "user", user, "from", from)
	}
	data, err := json.Marshal(p.result(user, from))
	if err != nil {
		return resource.Result{}, err
	}
	return resource.Result{Data: data, Secrets: map[string][]byte{passwordSecret: []byte(password)}}, nil
}

// Deprovision removes the account; sessions that authenticated with it can send no more.
// Retain changes nothing: the relay keeps no mail.
func (p *provider) Deprovision(_ context.Context, req resource.DeprovisionRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return err
	}
	if err := p.accounts.remove(req.Tenant, req.Instance); err != nil {
		return err
	}
	hclog.Default().Info("relay account removed", "tenant", req.Tenant, "instance", req.Instance)
	return nil
}

// Status is ready when the account exists with the request's From address.
func (p *provider) Status(_ context.Context, req resource.Request) (resource.Status, error) {
	from, err := fromAddress(req.Spec)
	if err != nil {
		return resource.Status{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return resource.Status{}, err
	}
	user := userName(req.Tenant, req.Instance)
	a, ok := p.accounts.get(user)
	switch {
	case !ok:
		return resource.Status{State: "missing", Message: "the relay has no account " + user}, nil
	case a.From != from:
		return resource.Status{State: "degraded", Message: "the relay's account sends from another address than the request's; provision again"}, nil
	}
	data, err := json.Marshal(p.result(user, from))
	if err != nil {
		return resource.Status{}, err
	}
	return resource.Status{State: "ready", Data: data}, nil
}

func (p *provider) result(user, from string) contract.SMTPResult {
	return contract.SMTPResult{Host: p.cfg.Host, Port: p.cfg.Port, User: user, Password: contract.SecretRef{Secret: passwordSecret}, From: from, TLS: p.cfg.TLS}
}

// ready says what to do when Configure has not run; p.mu is held.
func (p *provider) ready() error {
	if p.cfg == nil {
		return sdk.Unavailable("the relay is not configured: the host configures it at start; check the relay's settings in fedhost.hcl")
	}
	return nil
}

// checkAllowed refuses a From address on a domain the settings do not list; p.mu is held.
func (p *provider) checkAllowed(from string) error {
	if !p.cfg.allowed(from[strings.LastIndexByte(from, '@')+1:]) {
		return sdk.Invalid("request/domain", "the relay sends only from the domains in its settings (domains): ask the hosting provider to add the deployment's domain")
	}
	return nil
}

// senderRE is the contract's sender pattern.
var senderRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// fromAddress checks an smtp request and returns its From address. Errors name the
// field and never repeat its value.
func fromAddress(spec json.RawMessage) (string, error) {
	var r contract.SMTPRequest
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return "", sdk.Invalid("request", "the request is not an smtp request (sender, domain): %v", err)
	}
	if !senderRE.MatchString(r.Sender) || strings.Contains(r.Sender, "..") || strings.HasSuffix(r.Sender, ".") {
		return "", sdk.Invalid("request/sender", "sender is the local part of the From address: 1 to 64 lower-case letters, digits, dots, dashes and underscores, starting with a letter or digit, without two dots in a row or a dot at the end")
	}
	d := strings.TrimSuffix(r.Domain, ".")
	if err := checkDomain(d); err != nil {
		return "", sdk.Invalid("request/domain", "domain: %v", err)
	}
	return r.Sender + "@" + d, nil
}

// validPassword reports whether a password given back by the host is one this provider
// could have made: 43 characters of unpadded base64url.
func validPassword(s string) bool {
	if len(s) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

func newPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

var (
	_ resource.Provider       = (*provider)(nil)
	_ resource.Validator      = (*provider)(nil)
	_ resource.StatusReporter = (*provider)(nil)
	_ sdk.Configurer          = (*provider)(nil)
)
