package slapd

import (
	"testing"

	"github.com/go-ldap/ldap/v3"
)

// TestTenantACL checks what each party may read and bind under TenantACL's rules, and
// that the earlier rules (earlierACL) allow exactly the same: the bind account reads its
// tenant (passwords included) and nothing of another; a user and an anonymous client
// read nothing; a user binds with its password; an entry outside every tenant is
// neither readable nor a way in.
func TestTenantACL(t *testing.T) {
	for _, rules := range []struct {
		name  string
		rules []string
	}{{"earlier", earlierACL(benchBase)}, {"now", TenantACL(benchBase)}} {
		t.Run(rules.name, func(t *testing.T) {
			url := aclServer(t, rules.rules, 2)
			admin := dialBench(t, url, benchAdmin, "admin-password")
			defer admin.Close()
			outside := ldap.NewAddRequest("cn=outside,"+benchBase, nil)
			outside.Attribute("objectClass", []string{"organizationalRole", "simpleSecurityObject"})
			outside.Attribute("userPassword", []string{SSHA("outside-password")})
			if err := admin.Add(outside); err != nil {
				t.Fatal(err)
			}
			// read is what c's search of the subtree at base returns: the attribute names
			// of each entry by DN.
			read := func(c *ldap.Conn, base string) map[string][]string {
				res, err := c.Search(ldap.NewSearchRequest(base, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false,
					"(objectClass=*)", []string{"cn", "uid", "userPassword"}, nil))
				if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
					t.Fatal(err)
				}
				out := map[string][]string{}
				if res == nil {
					return out
				}
				for _, e := range res.Entries {
					for _, a := range e.Attributes {
						out[e.DN] = append(out[e.DN], a.Name)
					}
					if len(e.Attributes) == 0 {
						out[e.DN] = nil
					}
				}
				return out
			}
			t1 := dialBench(t, url, "cn=t1-app,ou=t1,"+benchBase, "bind-password")
			defer t1.Close()
			got := read(t1, "ou=t1,"+benchBase)
			for dn, want := range map[string]int{
				"ou=t1," + benchBase:                        0,
				"cn=t1-app,ou=t1," + benchBase:              2,
				"uid=user00001,ou=users,ou=t1," + benchBase: 3,
			} {
				if attrs, ok := got[dn]; !ok || len(attrs) != want {
					t.Errorf("the bind account of t1 reads %v of %s, want %d attributes", attrs, dn, want)
				}
			}
			for dn := range got {
				if len(dn) < len("ou=t1,"+benchBase) || dn[len(dn)-len("ou=t1,"+benchBase):] != "ou=t1,"+benchBase {
					t.Errorf("the bind account of t1 reads %s, outside its tenant", dn)
				}
			}
			for _, base := range []string{benchBase, "ou=t2," + benchBase, "cn=outside," + benchBase} {
				if got := read(t1, base); len(got) != 0 {
					t.Errorf("the bind account of t1 reads %v under %s", got, base)
				}
			}
			user := dialBench(t, url, "uid=user00001,ou=users,ou=t1,"+benchBase, "user-password")
			defer user.Close()
			if got := read(user, "ou=t1,"+benchBase); len(got) != 0 {
				t.Errorf("a user reads %v", got)
			}
			anon, err := ldap.DialURL(url)
			if err != nil {
				t.Fatal(err)
			}
			defer anon.Close()
			if got := read(anon, "ou=t1,"+benchBase); len(got) != 0 {
				t.Errorf("an anonymous client reads %v", got)
			}
			for _, bad := range []struct{ dn, password string }{
				{"uid=user00001,ou=users,ou=t1," + benchBase, "wrong-password"},
				{"cn=outside," + benchBase, "outside-password"},
			} {
				if err := anon.Bind(bad.dn, bad.password); !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
					t.Errorf("binding as %s: %v, want invalidCredentials", bad.dn, err)
				}
			}
			// The other tenant's bind account cannot set t1's user's password.
			t2 := dialBench(t, url, "cn=t2-app,ou=t2,"+benchBase, "bind-password")
			defer t2.Close()
			if _, err := t2.PasswordModify(ldap.NewPasswordModifyRequest("uid=user00001,ou=users,ou=t1,"+benchBase, "", "stolen-password")); err == nil {
				t.Error("the bind account of t2 set the password of a user of t1")
			}
			if _, err := t1.PasswordModify(ldap.NewPasswordModifyRequest("uid=user00000,ou=users,ou=t1,"+benchBase, "", "new-password")); err != nil {
				t.Errorf("the bind account of t1 setting its user's password: %v", err)
			}
		})
	}
}
