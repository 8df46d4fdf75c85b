package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-ldap/ldap/v3"
	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/ldaptest"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

// testServer is the slapd every test of this binary shares, started by TestMain;
// pluginBinary is this package's plugin, built beside it.
var (
	testServer   *ldaptest.Server
	pluginBinary string
)

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.MainWithServer(m, "slapd", func(dir string) (func(), error) {
		s, stop, err := ldaptest.Start(dir)
		if err != nil {
			return nil, err
		}
		testServer, pluginBinary = s, filepath.Join(dir, "fedhost-resource-openldap")
		if out, err := exec.Command("go", "build", "-o", pluginBinary, ".").CombinedOutput(); err != nil {
			stop()
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
		return stop, nil
	})
}

// settingsJSON are the plugin settings for the test server.
func settingsJSON() json.RawMessage {
	ts := testServer
	return fmt.Appendf(nil, `{"url":%q,"base_dn":%q,"admin_dn":%q,"admin_password_file":%q}`, ts.URL, ts.BaseDN, ts.AdminDN, ts.AdminPasswordFile)
}

func resultOf(p conformance.Provisioned) (contract.LDAPResult, error) {
	var r contract.LDAPResult
	if err := json.Unmarshal(p.Result, &r); err != nil {
		return r, fmt.Errorf("result of %s/%s: %w", p.Tenant, p.Instance, err)
	}
	return r, nil
}

// bindAs connects with the bind account of p's result, as an application would.
func bindAs(p conformance.Provisioned) (*ldap.Conn, contract.LDAPResult, error) {
	r, err := resultOf(p)
	if err != nil {
		return nil, r, err
	}
	pw, ok := p.Secrets[r.BindPassword.Secret]
	if !ok {
		return nil, r, fmt.Errorf("no secret %q for %s/%s", r.BindPassword.Secret, p.Tenant, p.Instance)
	}
	c, err := ldap.DialURL(r.URL)
	if err != nil {
		return nil, r, err
	}
	if err := c.Bind(r.BindDN, string(pw)); err != nil {
		c.Close()
		return nil, r, fmt.Errorf("bind as %s: %w", r.BindDN, err)
	}
	return c, r, nil
}

// addUser adds uid=name under usersDN on c.
func addUser(c *ldap.Conn, usersDN, name string) error {
	a := ldap.NewAddRequest("uid="+ldap.EscapeDN(name)+","+usersDN, nil)
	a.Attribute("objectClass", []string{"inetOrgPerson"})
	a.Attribute("uid", []string{name})
	a.Attribute("cn", []string{name})
	a.Attribute("sn", []string{name})
	return c.Add(a)
}

// entryExists asks the admin whether dn exists.
func entryExists(dn string) (bool, error) {
	c, err := testServer.Admin()
	if err != nil {
		return false, err
	}
	defer c.Close()
	_, err = c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{"1.1"}, nil))
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return false, nil
	}
	return err == nil, err
}

func TestConformance(t *testing.T) {
	conformance.Resource(t, pluginBinary, conformance.ResourceCase{
		Type:         "ldap",
		Settings:     settingsJSON(),
		Request:      json.RawMessage(`{"groups":["editors","readers"]}`),
		Invalid:      json.RawMessage(`{"groups":["editors","Bad Name"]}`),
		InvalidField: "request/groups/1",
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
			name := "access-" + from.Tenant
			if err := addUser(c, target.UsersDN, name); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
				return fmt.Errorf("adding a user under %s as %s: %w", target.UsersDN, from.Tenant, err)
			}
			res, err := c.Search(ldap.NewSearchRequest(target.UsersDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false, "(uid="+ldap.EscapeFilter(name)+")", []string{"uid"}, nil))
			if err != nil {
				return fmt.Errorf("searching %s as %s: %w", target.UsersDN, from.Tenant, err)
			}
			if len(res.Entries) != 1 {
				return fmt.Errorf("searching %s as %s found %d entries, want 1", target.UsersDN, from.Tenant, len(res.Entries))
			}
			return nil
		},
		Exists: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			return entryExists(r.BindDN)
		},
		Seed: func(_ context.Context, p conformance.Provisioned) error {
			c, r, err := bindAs(p)
			if err != nil {
				return err
			}
			defer c.Close()
			return addUser(c, r.UsersDN, "seed")
		},
		DataKept: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			return entryExists("uid=seed," + r.UsersDN)
		},
	})
}
