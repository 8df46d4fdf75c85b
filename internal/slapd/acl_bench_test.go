package slapd

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/internal/child"
)

// earlierACL are the rules TenantACL gave before its rules were reordered and its pattern
// anchored at a comma: the reference BenchmarkTenantACL measures them against.
func earlierACL(base string) []string {
	to := `dn.regex="^(.+,)?ou=([^,]+),` + base + `$"`
	owner := `dn.onelevel,expand="ou=$2,` + base + `"`
	return []string{
		"to " + to + " attrs=userPassword by " + owner + " write by anonymous auth by * none",
		"to " + to + " by " + owner + " write by * none",
		"to * by * none",
	}
}

const (
	benchBase  = "dc=fedhost,dc=test"
	benchAdmin = "cn=admin," + benchBase
	benchUsers = 10000
)

// benchServer is a slapd with rules, a tenant t1 with its bind account, and benchUsers
// users with a password under ou=users,ou=t1: the layout the openldap provider makes.
func benchServer(b *testing.B, rules []string) (url string) {
	return aclServer(b, rules, benchUsers)
}

// aclServer is a slapd with rules and tenants t1 and t2, each with its bind account
// cn=<tenant>-app (password bind-password) and users user00000... (user-password) under
// ou=users: users of them in t1, one in t2.
func aclServer(b testing.TB, rules []string, users int) (url string) {
	b.Helper()
	dir := Dir(b.TempDir())
	if err := dir.init(benchBase, benchAdmin, "admin-password", rules); err != nil {
		b.Fatal(err)
	}
	port, err := child.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	p, err := dir.Start(port, benchAdmin, "admin-password", 20*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	c := dialBench(b, p.URL, benchAdmin, "admin-password")
	defer c.Close()
	add := func(dn string, attrs map[string][]string) {
		a := ldap.NewAddRequest(dn, nil)
		for k, v := range attrs {
			a.Attribute(k, v)
		}
		if err := c.Add(a); err != nil {
			b.Fatal(err)
		}
	}
	for _, t := range []string{"t1", "t2"} {
		add("ou="+t+","+benchBase, map[string][]string{"objectClass": {"organizationalUnit"}, "ou": {t}})
		add("cn="+t+"-app,ou="+t+","+benchBase, map[string][]string{"objectClass": {"organizationalRole", "simpleSecurityObject"}, "cn": {t + "-app"}, "userPassword": {SSHA("bind-password")}})
		add("ou=users,ou="+t+","+benchBase, map[string][]string{"objectClass": {"organizationalUnit"}, "ou": {"users"}})
		n := users
		if t == "t2" {
			n = 1
		}
		for i := range n {
			name := fmt.Sprintf("user%05d", i)
			add("uid="+name+",ou=users,ou="+t+","+benchBase, map[string][]string{"objectClass": {"inetOrgPerson"}, "uid": {name}, "cn": {name}, "sn": {name},
				"mail": {name + "@acme.test"}, "userPassword": {SSHA("user-password")}})
		}
	}
	return p.URL
}

func dialBench(b testing.TB, url, dn, password string) *ldap.Conn {
	c, err := ldap.DialURL(url, ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Bind(dn, password); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkTenantACL lists a tenant's 10,000 users as its bind account, and binds as one
// of them, under the earlier rules and under TenantACL's, on two slapds at once: each
// iteration asks both in turn and each one's time is reported (earlier-ms, now-ms), so
// that a load other work puts on the machine weighs on both alike.
func BenchmarkTenantACL(b *testing.B) {
	urls := []string{benchServer(b, earlierACL(benchBase)), benchServer(b, TenantACL(benchBase))}
	names := []string{"earlier-ms", "now-ms"}
	conns := make([]*ldap.Conn, len(urls))
	for i, url := range urls {
		conns[i] = dialBench(b, url, "cn=t1-app,ou=t1,"+benchBase, "bind-password")
		defer conns[i].Close()
	}
	// side runs op on each server in turn per iteration and reports each one's time.
	side := func(b *testing.B, op func(c *ldap.Conn) error) {
		var spent [2]time.Duration
		for b.Loop() {
			for i, c := range conns {
				start := time.Now()
				if err := op(c); err != nil {
					b.Fatal(err)
				}
				spent[i] += time.Since(start)
			}
		}
		for i, d := range spent {
			b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), names[i])
		}
	}
	for _, list := range []struct {
		name  string
		attrs []string
	}{{"list-5-attrs", []string{"uid", "cn", "mail", "displayName", "pwdAccountLockedTime"}}, {"list-dn-only", []string{"1.1"}}} {
		b.Run(list.name, func(b *testing.B) {
			side(b, func(c *ldap.Conn) error {
				res, err := c.SearchWithPaging(ldap.NewSearchRequest("ou=users,ou=t1,"+benchBase, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false,
					"(objectClass=inetOrgPerson)", list.attrs, nil), 1000)
				if err == nil && len(res.Entries) != benchUsers {
					err = fmt.Errorf("%d entries", len(res.Entries))
				}
				return err
			})
		})
	}
	b.Run("bind", func(b *testing.B) {
		side(b, func(c *ldap.Conn) error { return c.Bind("uid=user00042,ou=users,ou=t1,"+benchBase, "user-password") })
	})
}
