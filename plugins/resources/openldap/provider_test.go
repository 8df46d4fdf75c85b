package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// setup returns a provider configured for the test server.
func setup(t *testing.T) *provider {
	t.Helper()
	p := &provider{}
	if err := p.Configure(context.Background(), settingsJSON()); err != nil {
		t.Fatal(err)
	}
	return p
}

// provision provisions tenant/instance with groups and returns its result and password.
func provision(t *testing.T, p *provider, tenant, instance string, secrets map[string][]byte, groups ...string) (contract.LDAPResult, string) {
	t.Helper()
	spec, _ := json.Marshal(contract.LDAPRequest{Groups: groups})
	res, err := p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: instance, Type: "ldap", Spec: spec, Secrets: secrets})
	if err != nil {
		t.Fatalf("provision %s/%s: %v", tenant, instance, err)
	}
	var r contract.LDAPResult
	if err := json.Unmarshal(res.Data, &r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: instance, Type: "ldap"})
	})
	return r, string(res.Secrets[passwordKey])
}

func bind(t *testing.T, r contract.LDAPResult, password string) *ldap.Conn {
	t.Helper()
	c, err := ldap.DialURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Bind(r.BindDN, password); err != nil {
		t.Fatalf("bind as %s: %v", r.BindDN, err)
	}
	return c
}

func search(c *ldap.Conn, base string) ([]*ldap.Entry, error) {
	res, err := c.Search(ldap.NewSearchRequest(base, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{"cn", "uid", "member"}, nil))
	if err != nil {
		return nil, err
	}
	return res.Entries, nil
}

// adminRead returns attr of dn as the admin sees it.
func adminRead(t *testing.T, dn, attr string) []string {
	t.Helper()
	c, err := testServer.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{attr}, nil))
	if err != nil {
		t.Fatalf("reading %s: %v", dn, err)
	}
	return res.Entries[0].GetAttributeValues(attr)
}

// TestIsolation proves the access rule: a bind account reads and writes its own
// deployment's subtree and sees nothing of another's, nor can write there.
func TestIsolation(t *testing.T) {
	p := setup(t)
	a, pwA := provision(t, p, "iso-a", "dir", nil, "staff")
	b, pwB := provision(t, p, "iso-b", "dir", nil, "staff")
	ca, cb := bind(t, a, pwA), bind(t, b, pwB)

	if err := addUser(ca, a.UsersDN, "alice"); err != nil {
		t.Fatalf("A adding a user to its own subtree: %v", err)
	}
	if err := addUser(cb, b.UsersDN, "bob"); err != nil {
		t.Fatalf("B adding a user to its own subtree: %v", err)
	}
	own, err := search(ca, a.BaseDN)
	if err != nil || len(own) < 5 {
		t.Fatalf("A searching its own subtree: %v, %d entries (want the root, users, groups, the group, the bind account and alice)", err, len(own))
	}
	mod := ldap.NewModifyRequest("cn=staff,"+a.GroupsDN, nil)
	mod.Add("member", []string{"uid=alice," + a.UsersDN})
	if err := ca.Modify(mod); err != nil {
		t.Fatalf("A putting alice in its group: %v", err)
	}

	// A reads nothing of B: searching B's subtree, or the whole directory, finds none of it.
	got, err := search(ca, b.BaseDN)
	if err == nil && len(got) > 0 {
		t.Fatalf("A found %d entries of B's subtree, first %s", len(got), got[0].DN)
	}
	// The base entry is no tenant's: slapd answers noSuchObject rather than say it exists.
	all, err := search(ca, testServer.BaseDN)
	if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		t.Fatalf("A searching the whole directory: %v", err)
	}
	for _, e := range all {
		if !strings.HasSuffix(strings.ToLower(e.DN), strings.ToLower(a.BaseDN)) {
			t.Fatalf("A's search of the directory returned %s, outside its subtree", e.DN)
		}
	}
	// A writes nothing of B: no new user, no change to B's user, B's group or B's
	// bind account's password, no delete.
	if err := addUser(ca, b.UsersDN, "mallory"); !ldap.IsErrorWithCode(err, ldap.LDAPResultInsufficientAccessRights) && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		t.Fatalf("A adding a user under B's users: %v, want insufficientAccessRights", err)
	}
	mod = ldap.NewModifyRequest("uid=bob,"+b.UsersDN, nil)
	mod.Replace("sn", []string{"changed by A"})
	if err := ca.Modify(mod); err == nil {
		t.Fatal("A changed B's user")
	}
	mod = ldap.NewModifyRequest("cn=staff,"+b.GroupsDN, nil)
	mod.Add("member", []string{"uid=alice," + a.UsersDN})
	if err := ca.Modify(mod); err == nil {
		t.Fatal("A put its user in B's group")
	}
	if _, err := ca.PasswordModify(ldap.NewPasswordModifyRequest(b.BindDN, "", "stolen-password-123")); err == nil {
		t.Fatal("A set the password of B's bind account")
	}
	if err := ca.Del(ldap.NewDelRequest("uid=bob,"+b.UsersDN, nil)); err == nil {
		t.Fatal("A deleted B's user")
	}
	if v := adminRead(t, "uid=bob,"+b.UsersDN, "sn"); len(v) != 1 || v[0] != "bob" {
		t.Fatalf("B's user's sn is %q after A's attempts", v)
	}
	bind(t, b, pwB) // B's password still works
}

// TestProvisionAgain proves a second provision with the password the host hands back
// changes nothing: the same result, and the same stored hash (the password is not set
// again). The stored value is the server's salted hash, never the password.
func TestProvisionAgain(t *testing.T) {
	p := setup(t)
	r1, pw := provision(t, p, "again", "dir", nil, "editors")
	hash := adminRead(t, r1.BindDN, "userPassword")
	if len(hash) != 1 || !strings.HasPrefix(hash[0], "{SSHA}") || strings.Contains(hash[0], pw) {
		t.Fatalf("the bind account's userPassword is %d values, not one {SSHA} hash", len(hash))
	}
	r2, pw2 := provision(t, p, "again", "dir", map[string][]byte{passwordKey: []byte(pw)}, "editors")
	if r1 != r2 || pw2 != pw {
		t.Fatalf("provision again gave %+v (same password %v), want %+v", r2, pw2 == pw, r1)
	}
	if again := adminRead(t, r1.BindDN, "userPassword"); len(again) != 1 || again[0] != hash[0] {
		t.Fatal("provision again set the password anew")
	}
	bind(t, r2, pw)
	// A group added later is made; the earlier one stays.
	provision(t, p, "again", "dir", map[string][]byte{passwordKey: []byte(pw)}, "editors", "readers")
	for _, g := range []string{"editors", "readers"} {
		if ok, err := entryExists("cn=" + g + "," + r1.GroupsDN); err != nil || !ok {
			t.Fatalf("group %s: exists %v, %v", g, ok, err)
		}
	}
}

// TestPasswordRestored proves the password the host hands back is put back when the
// directory lost or changed it.
func TestPasswordRestored(t *testing.T) {
	p := setup(t)
	r, pw := provision(t, p, "restore", "dir", nil)
	c, err := testServer.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.PasswordModify(ldap.NewPasswordModifyRequest(r.BindDN, "", "some-other-password")); err != nil {
		t.Fatal(err)
	}
	provision(t, p, "restore", "dir", map[string][]byte{passwordKey: []byte(pw)})
	bind(t, r, pw)
}

// TestRetainAndDeprovision proves retain keeps the users and groups but removes the bind
// account, and a deprovision without it removes the whole subtree.
func TestRetainAndDeprovision(t *testing.T) {
	p := setup(t)
	ctx := context.Background()
	r, pw := provision(t, p, "keep", "dir", nil, "staff")
	if err := addUser(bind(t, r, pw), r.UsersDN, "carol"); err != nil {
		t.Fatal(err)
	}
	if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "keep", Instance: "dir", Type: "ldap", Retain: true}); err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]bool{"uid=carol," + r.UsersDN: true, "cn=staff," + r.GroupsDN: true, r.BindDN: false} {
		if ok, err := entryExists(dn); err != nil || ok != want {
			t.Fatalf("after a retained deprovision %s exists %v (%v), want %v", dn, ok, err, want)
		}
	}
	st, err := p.Status(ctx, resource.Request{Tenant: "keep", Instance: "dir", Type: "ldap"})
	if err != nil || st.State != "missing" {
		t.Fatalf("status after retain: %+v, %v", st, err)
	}
	if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "keep", Instance: "dir", Type: "ldap"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := entryExists(r.BaseDN); err != nil || ok {
		t.Fatalf("after deprovision %s exists %v (%v)", r.BaseDN, ok, err)
	}
	// Deprovisioning what is gone succeeds.
	if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "keep", Instance: "dir", Type: "ldap"}); err != nil {
		t.Fatal(err)
	}
}

// TestSecondInstance proves one instance's deprovision leaves the subtree another
// instance of the deployment still binds to.
func TestSecondInstance(t *testing.T) {
	p := setup(t)
	ctx := context.Background()
	provision(t, p, "two", "one", nil)
	r2, pw2 := provision(t, p, "two", "other", nil)
	if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "two", Instance: "one", Type: "ldap"}); err != nil {
		t.Fatal(err)
	}
	if err := addUser(bind(t, r2, pw2), r2.UsersDN, "dave"); err != nil {
		t.Fatalf("the other instance after the first's deprovision: %v", err)
	}
}

func TestValidate(t *testing.T) {
	p := &provider{}
	long := strings.Repeat("a", 64)
	cases := []struct {
		spec, field string
	}{
		{`{"groups":["ok","Bad Name"]}`, "request/groups/1"},
		{`{"groups":["cn=x,dc=evil"]}`, "request/groups/0"},
		{`{"groups":["` + long + `"]}`, "request/groups/0"},
		{`{"groups":["a","a"]}`, "request/groups/1"},
		{`{"groups":[""]}`, "request/groups/0"},
		{`{"group":["a"]}`, "request"},
		{`[]`, "request"},
	}
	for _, c := range cases {
		err := p.Validate(context.Background(), "ldap", json.RawMessage(c.spec))
		if sdk.CodeOf(err) != sdk.CodeInvalid || sdk.FieldOf(err) != c.field {
			t.Errorf("Validate(%s) = %v (field %q), want invalid naming %s", c.spec, err, sdk.FieldOf(err), c.field)
		}
		if err != nil && strings.Contains(err.Error(), "evil") {
			t.Errorf("Validate(%s) echoes the input: %v", c.spec, err)
		}
	}
	for _, ok := range []string{`{}`, `{"groups":["miniflux-admins","a","z9"]}`, ``} {
		if err := p.Validate(context.Background(), "ldap", json.RawMessage(ok)); err != nil {
			t.Errorf("Validate(%s) = %v", ok, err)
		}
	}
}

func TestSettingsRefused(t *testing.T) {
	for _, c := range []struct{ settings, field string }{
		{`{"url":"http://x/","base_dn":"dc=a","admin_dn":"cn=a","admin_password_file":"/nonexistent"}`, "settings/url"},
		{`{"url":"ldap://x/","base_dn":"not a dn","admin_dn":"cn=a","admin_password_file":"/nonexistent"}`, "settings/base_dn"},
		{`{"url":"ldap://x/","base_dn":"dc=a","admin_dn":"cn=a","admin_password_file":"/nonexistent"}`, "settings/admin_password_file"},
	} {
		err := (&provider{}).Configure(context.Background(), json.RawMessage(c.settings))
		if sdk.FieldOf(err) != c.field {
			t.Errorf("Configure(%s) = %v, want an error naming %s", c.settings, err, c.field)
		}
	}
	// A wrong admin password is reported on the first call, naming the setting.
	s := settingsJSON()
	var m map[string]string
	_ = json.Unmarshal(s, &m)
	m["admin_dn"] = "cn=nobody," + testServer.BaseDN
	s, _ = json.Marshal(m)
	p := &provider{}
	if err := p.Configure(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	_, err := p.Provision(context.Background(), resource.Request{Tenant: "wrong", Instance: "dir", Type: "ldap", Spec: json.RawMessage(`{}`)})
	if sdk.CodeOf(err) != sdk.CodeUnavailable || !strings.Contains(err.Error(), "admin_password_file") {
		t.Fatalf("provision with a wrong admin: %v", err)
	}
}
