package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// TestManaged proves the managed mode: the plugin sets up and runs slapd from its data
// dir with the isolation rules, and a restarted plugin finds the same directory (port,
// admin password, entries) again.
func TestManaged(t *testing.T) {
	t.Setenv(sdk.DataDirEnv, t.TempDir())
	ctx := context.Background()
	start := func() *provider {
		p := &provider{}
		if err := p.Configure(ctx, json.RawMessage(`{"managed":true}`)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := start()
	provisionOn := func(p *provider, tenant string, secrets map[string][]byte) (contract.LDAPResult, string) {
		res, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "dir", Type: "ldap", Spec: json.RawMessage(`{"groups":["staff"]}`), Secrets: secrets})
		if err != nil {
			t.Fatalf("provision %s: %v", tenant, err)
		}
		var r contract.LDAPResult
		if err := json.Unmarshal(res.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r, string(res.Secrets[passwordKey])
	}
	a, pwA := provisionOn(p, "ma", nil)
	b, _ := provisionOn(p, "mb", nil)
	ca := bind(t, a, pwA)
	if err := addUser(ca, a.UsersDN, "alice"); err != nil {
		t.Fatalf("A adding its user on the managed slapd: %v", err)
	}
	if got, err := search(ca, b.BaseDN); err == nil && len(got) > 0 {
		t.Fatalf("A found %d entries of B's subtree on the managed slapd", len(got))
	}
	if err := addUser(ca, b.UsersDN, "mallory"); err == nil {
		t.Fatal("A added a user to B's subtree on the managed slapd")
	}

	// A plugin restart: slapd stops with it and starts again from the data dir.
	p.close()
	p = start()
	defer p.close()
	again, pw := provisionOn(p, "ma", map[string][]byte{passwordKey: []byte(pwA)})
	if again != a || pw != pwA {
		t.Fatalf("after a restart provision gave %+v, want %+v", again, a)
	}
	res, err := search(bind(t, again, pwA), "uid=alice,"+a.UsersDN)
	if err != nil || len(res) != 1 {
		t.Fatalf("alice after a restart: %v, %d entries", err, len(res))
	}
	for _, tenant := range []string{"ma", "mb"} {
		if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "dir", Type: "ldap"}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ldap.DialURL(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bind(a.BindDN, pwA); !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
		t.Fatalf("A's bind account after deprovision: %v, want invalidCredentials", err)
	}
}

func TestManagedSettingsRefused(t *testing.T) {
	t.Setenv(sdk.DataDirEnv, "")
	for _, c := range []struct{ settings, field string }{
		{`{"managed":true,"url":"ldap://127.0.0.1/"}`, "settings/url"},
		{`{"managed":true,"admin_password_file":"/x"}`, "settings/admin_password_file"},
		{`{"managed":true}`, "settings/managed"},
	} {
		p := &provider{}
		err := p.Configure(context.Background(), json.RawMessage(c.settings))
		if sdk.FieldOf(err) != c.field {
			t.Errorf("Configure(%s) = %v, want an error naming %s", c.settings, err, c.field)
		}
	}
}

// binds reports whether dn binds with password at url: false for invalidCredentials
// (no such entry, or no such password), an error for anything else.
func binds(url, dn, password string) (bool, error) {
	c, err := ldap.DialURL(url)
	if err != nil {
		return false, err
	}
	defer c.Close()
	err = c.Bind(dn, password)
	if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
		return false, nil
	}
	return err == nil, err
}

// seedPassword is the password Seed gives its user, for DataKept to bind with.
const seedPassword = "seed-user-password-1"

// TestConformanceManaged runs the conformance checks on the plugin binary in managed
// mode: slapd in the data dir the suite gives, started by the plugin, ended with it.
// Without the admin's password at hand, an object exists when its bind account binds,
// and the seeded user is kept when it binds.
func TestConformanceManaged(t *testing.T) {
	conformance.Resource(t, pluginBinary, conformance.ResourceCase{
		Type:         "ldap",
		Settings:     json.RawMessage(`{"managed":true}`),
		Request:      json.RawMessage(`{"groups":["editors"]}`),
		Invalid:      json.RawMessage(`{"groups":["Bad Name"]}`),
		InvalidField: "request/groups/0",
		Access: func(_ context.Context, from, to conformance.Provisioned) error {
			c, _, err := bindAs(from)
			if err != nil {
				return err
			}
			defer c.Close()
			target, err := resultOf(to)
			if err != nil {
				return err
			}
			if err := addUser(c, target.UsersDN, "access-"+from.Tenant); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
				return fmt.Errorf("adding a user under %s as %s: %w", target.UsersDN, from.Tenant, err)
			}
			return nil
		},
		Exists: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			return binds(r.URL, r.BindDN, string(p.Secrets[r.BindPassword.Secret]))
		},
		Seed: func(_ context.Context, p conformance.Provisioned) error {
			c, r, err := bindAs(p)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := addUser(c, r.UsersDN, "seed"); err != nil {
				return err
			}
			_, err = c.PasswordModify(ldap.NewPasswordModifyRequest("uid=seed,"+r.UsersDN, "", seedPassword))
			return err
		},
		DataKept: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			return binds(r.URL, "uid=seed,"+r.UsersDN, seedPassword)
		},
	})
}
