package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/slapd"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// passwordKey names the bind account's password in Result.Secrets and Request.Secrets.
const passwordKey = "bind-password"

// maxGroups bounds a request's groups.
const maxGroups = 100

// provider serves the ldap type on the configured directory.
type provider struct {
	mu  sync.Mutex
	dir *directory
	// proc is the managed slapd, run from procDir, when the settings ask for one.
	proc    *slapd.Process
	procDir string
}

func (p *provider) current() (*directory, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == nil {
		return nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first request")
	}
	return p.dir, nil
}

// groupRE is the contract's pattern for a group name: a lower-case label, which is a
// safe RDN value as it stands (no character ldap.EscapeDN would have to escape).
var groupRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// parseRequest reads an ldap request and checks its groups.
func parseRequest(spec json.RawMessage) (contract.LDAPRequest, error) {
	var r contract.LDAPRequest
	if len(bytes.TrimSpace(spec)) == 0 {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		// The decoder's message quotes the input; this one does not.
		return r, sdk.Invalid("request", "not an ldap request: an object with at most groups, a list of names such as {\"groups\": [\"editors\"]}")
	}
	if len(r.Groups) > maxGroups {
		return r, sdk.Invalid("request/groups", "%d groups: at most %d", len(r.Groups), maxGroups)
	}
	seen := map[string]bool{}
	for i, g := range r.Groups {
		field := fmt.Sprintf("request/groups/%d", i)
		if !groupRE.MatchString(g) {
			return r, sdk.Invalid(field, "a group name is 1 to 63 lower-case letters, digits and hyphens, starting with a letter")
		}
		if seen[g] {
			return r, sdk.Invalid(field, "group %s is listed twice", g)
		}
		seen[g] = true
	}
	return r, nil
}

// Validate checks a request without reaching the directory.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	_, err := parseRequest(spec)
	return err
}

// passwordOf keeps the password the host hands back, or makes one.
func passwordOf(secrets map[string][]byte) (string, error) {
	if pw, ok := secrets[passwordKey]; ok {
		if len(pw) < 16 || len(pw) > 128 || !bytes.Equal(bytes.TrimSpace(pw), pw) {
			return "", sdk.Invalid("secrets/"+passwordKey, "the stored bind password is not 16 to 128 characters without spaces at its ends: remove the secret to have a new one made")
		}
		return string(pw), nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Provision makes the deployment's subtree, the groups asked for and the instance's bind
// account, and gives the account its password (the one the host hands back, if any).
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	d, err := p.current()
	if err != nil {
		return resource.Result{}, err
	}
	r, err := parseRequest(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	password, err := passwordOf(req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	s := d.subtree(req.Tenant, req.Instance)
	changed, err := d.ensure(ctx, s, r.Groups, password)
	if err != nil {
		return resource.Result{}, err
	}
	data, err := json.Marshal(d.result(s))
	if err != nil {
		return resource.Result{}, err
	}
	hclog.Default().Info("directory subtree ready", "base_dn", s.root(), "bind_dn", s.bindDN(), "groups", len(r.Groups), "changed", changed)
	return resource.Result{Data: data, Secrets: map[string][]byte{passwordKey: []byte(password)}}, nil
}

func (d *directory) result(s subtree) contract.LDAPResult {
	return contract.LDAPResult{
		URL:          d.publicURL,
		BaseDN:       s.root(),
		UsersDN:      s.users(),
		GroupsDN:     s.groups(),
		BindDN:       s.bindDN(),
		BindPassword: contract.SecretRef{Secret: passwordKey},
	}
}

// Deprovision deletes the bind account and, unless told to retain, the subtree with its
// users and groups (when no other instance of the deployment still has a bind account).
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	d, err := p.current()
	if err != nil {
		return err
	}
	s := d.subtree(req.Tenant, req.Instance)
	deleted, err := d.remove(ctx, s, req.Retain)
	if err != nil {
		return err
	}
	hclog.Default().Info("directory subtree removed", "base_dn", s.root(), "bind_dn", s.bindDN(), "entries_kept", req.Retain, "entries_deleted", deleted)
	return nil
}

// Status reports ready when the subtree and the bind account exist, missing otherwise.
func (p *provider) Status(ctx context.Context, req resource.Request) (resource.Status, error) {
	d, err := p.current()
	if err != nil {
		return resource.Status{}, err
	}
	s := d.subtree(req.Tenant, req.Instance)
	ok, err := d.exists(ctx, s)
	if err != nil {
		return resource.Status{}, err
	}
	if !ok {
		return resource.Status{State: "missing", Message: fmt.Sprintf("%s or its bind account %s does not exist: provision again", s.root(), s.bindDN())}, nil
	}
	data, err := json.Marshal(d.result(s))
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
