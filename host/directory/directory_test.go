package directory_test

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-ldap/ldap/v3"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/internal/ldaptest"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// The slapd the tests share and the openldap provider that makes each test's subtree.
var (
	testServer *ldaptest.Server
	provider   *resource.Client
	tenants    atomic.Int64
)

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.MainWithServer(m, "slapd", func(dir string) (func(), error) {
		s, stop, err := ldaptest.Start(dir)
		if err != nil {
			return nil, err
		}
		testServer = s
		bin := filepath.Join(dir, "fedhost-resource-openldap")
		if out, err := exec.Command("go", "build", "-o", bin, "../../plugins/resources/openldap").CombinedOutput(); err != nil {
			stop()
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
		ctx := context.Background()
		p, err := client.Start(ctx, bin)
		if err != nil {
			stop()
			return nil, err
		}
		settings := fmt.Appendf(nil, `{"url":%q,"base_dn":%q,"admin_dn":%q,"admin_password_file":%q}`, s.URL, s.BaseDN, s.AdminDN, s.AdminPasswordFile)
		if err := p.Configure(ctx, settings); err != nil {
			p.Kill()
			stop()
			return nil, err
		}
		provider = p.Resource()
		return func() { p.Kill(); stop() }, nil
	})
}

// subtree has the provider make a new deployment's subtree with groups and returns its
// result and bind password, as the host keeps them.
func subtree(t testing.TB, groups ...string) (contract.LDAPResult, []byte) {
	t.Helper()
	spec, err := json.Marshal(contract.LDAPRequest{Groups: groups})
	require.NoError(t, err)
	tenant := fmt.Sprintf("t%d", tenants.Add(1))
	res, err := provider.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: "directory", Type: contract.LDAP, Spec: spec})
	require.NoError(t, err)
	var r contract.LDAPResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	return r, res.Secrets[r.BindPassword.Secret]
}

func setup(t testing.TB, groups ...string) (*directory.Directory, contract.LDAPResult) {
	t.Helper()
	r, pw := subtree(t, groups...)
	d, err := directory.New(r, pw)
	require.NoError(t, err)
	return d, r
}

// bind signs in as a user, as the OpenID provider does.
func bind(t *testing.T, r contract.LDAPResult, name, password string) error {
	t.Helper()
	c, err := ldap.DialURL(r.URL)
	require.NoError(t, err)
	defer c.Close()
	return c.Bind("uid="+name+","+r.UsersDN, password)
}

func code(t *testing.T, err error) (string, string) {
	t.Helper()
	var de *directory.Error
	require.ErrorAs(t, err, &de)
	return de.Code, de.Field
}

// A user is added in its groups with no password, sets one (stored hashed), signs in,
// is disabled (ppolicy refuses the bind, even with the right password), enabled again,
// and deleted out of every group.
func TestUserLifecycle(t *testing.T) {
	t.Parallel()
	d, r := setup(t, "miniflux-users", "miniflux-admins")
	require.NoError(t, d.Add(directory.User{Name: "alice", DisplayName: "Alice Liddell", Email: "alice@acme.test", Groups: []string{"miniflux-users"}}))
	users, err := d.Users()
	require.NoError(t, err)
	require.Equal(t, []directory.User{{Name: "alice", DisplayName: "Alice Liddell", Email: "alice@acme.test", Groups: []string{"miniflux-users"}}}, users)

	require.NoError(t, d.SetPassword("alice", "correct horse battery"))
	require.NoError(t, bind(t, r, "alice", "correct horse battery"))
	admin, err := testServer.Admin()
	require.NoError(t, err)
	defer admin.Close()
	res, err := admin.Search(ldap.NewSearchRequest("uid=alice,"+r.UsersDN, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{"userPassword"}, nil))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(res.Entries[0].GetAttributeValue("userPassword"), "{SSHA}"), "slapd hashed the password")

	require.NoError(t, d.SetDisabled("alice", true))
	require.Error(t, bind(t, r, "alice", "correct horse battery"), "a disabled user cannot bind")
	u, err := d.User("alice")
	require.NoError(t, err)
	require.True(t, u.Disabled)
	require.NoError(t, d.SetDisabled("alice", false))
	require.NoError(t, bind(t, r, "alice", "correct horse battery"))

	require.NoError(t, d.AddToGroup("alice", "miniflux-admins"))
	require.NoError(t, d.AddToGroup("alice", "miniflux-admins"), "a member already is fine")
	u, err = d.User("alice")
	require.NoError(t, err)
	require.Equal(t, []string{"miniflux-admins", "miniflux-users"}, u.Groups)
	require.NoError(t, d.RemoveFromGroup("alice", "miniflux-users"))

	require.NoError(t, d.Delete("alice"))
	_, err = d.User("alice")
	c, field := code(t, err)
	require.Equal(t, directory.CodeNotFound, c)
	require.Equal(t, "name", field)
	groups, err := d.Groups()
	require.NoError(t, err)
	for _, g := range groups {
		require.Empty(t, g.Members, "group %s", g.Name)
	}
	require.Error(t, bind(t, r, "alice", "correct horse battery"))
}

// UsersPage answers the users after a name, sorted, a page at a time, with their groups,
// and says whether more follow; the pages together are the whole list.
func TestUsersPage(t *testing.T) {
	t.Parallel()
	d, _ := setup(t, "staff")
	for _, name := range []string{"erin", "bob", "dave", "alice", "carol"} {
		u := directory.User{Name: name}
		if name == "bob" || name == "erin" {
			u.Groups = []string{"staff"}
		}
		require.NoError(t, d.Add(u))
	}
	all, err := d.Users()
	require.NoError(t, err)
	var paged []directory.User
	var names [][]string
	after := ""
	for {
		page, more, err := d.UsersPage(after, 2)
		require.NoError(t, err)
		var ns []string
		for _, u := range page {
			ns = append(ns, u.Name)
		}
		names = append(names, ns)
		paged = append(paged, page...)
		if !more {
			break
		}
		after = page[len(page)-1].Name
	}
	require.Equal(t, [][]string{{"alice", "bob"}, {"carol", "dave"}, {"erin"}}, names)
	require.Equal(t, all, paged)
	require.Equal(t, []string{"staff"}, paged[1].Groups)
	require.Equal(t, []string{}, paged[0].Groups)

	page, more, err := d.UsersPage("zed", 10)
	require.NoError(t, err)
	require.Empty(t, page)
	require.False(t, more)
	page, more, err = d.UsersPage("", 5)
	require.NoError(t, err)
	require.Len(t, page, 5)
	require.False(t, more, "exactly the last user fills the page")
	_, _, err = d.UsersPage("Not A Name", 10)
	c, field := code(t, err)
	require.Equal(t, directory.CodeInvalid, c)
	require.Equal(t, "after", field)
	_, _, err = d.UsersPage("", directory.MaxPage+1)
	_, field = code(t, err)
	require.Equal(t, "limit", field)
}

// The last member of a group can leave it: the bind account stands in.
func TestLastMemberLeavesAGroup(t *testing.T) {
	t.Parallel()
	d, r := setup(t, "editors")
	admin, err := testServer.Admin()
	require.NoError(t, err)
	defer admin.Close()
	m := ldap.NewModifyRequest("cn=editors,"+r.GroupsDN, nil)
	m.Replace("member", []string{"uid=bob," + r.UsersDN})
	require.NoError(t, d.Add(directory.User{Name: "bob"}))
	require.NoError(t, admin.Modify(m))
	require.NoError(t, d.RemoveFromGroup("bob", "editors"))
	groups, err := d.Groups()
	require.NoError(t, err)
	require.Equal(t, []directory.Group{{Name: "editors", Members: []string{}}}, groups)
}

// Bad input is refused naming the field, and leaves nothing in the directory.
func TestBadInputLeavesNothing(t *testing.T) {
	t.Parallel()
	d, _ := setup(t, "miniflux-users")
	require.NoError(t, d.Add(directory.User{Name: "alice"}))
	for _, c := range []struct {
		user        directory.User
		code, field string
	}{
		{directory.User{Name: "bad name"}, directory.CodeInvalid, "name"},
		{directory.User{Name: strings.Repeat("a", 300)}, directory.CodeInvalid, "name"},
		{directory.User{Name: "Upper"}, directory.CodeInvalid, "name"},
		{directory.User{Name: "alice"}, directory.CodeConflict, "name"},
		{directory.User{Name: "carol", Groups: []string{"miniflux-users", "nosuch"}}, directory.CodeNotFound, "groups/1"},
		{directory.User{Name: "carol", Groups: []string{"miniflux-users", "miniflux-users"}}, directory.CodeInvalid, "groups/1"},
		{directory.User{Name: "carol", Email: "not an address"}, directory.CodeInvalid, "email"},
		{directory.User{Name: "carol", DisplayName: "evil\u202etext"}, directory.CodeInvalid, "display_name"},
		{directory.User{Name: "carol", DisplayName: strings.Repeat("x", 300)}, directory.CodeInvalid, "display_name"},
	} {
		err := d.Add(c.user)
		gotCode, gotField := code(t, err)
		require.Equal(t, c.code, gotCode, "%+v: %v", c.user, err)
		require.Equal(t, c.field, gotField, "%+v: %v", c.user, err)
		require.NotContains(t, err.Error(), "not an address")
	}
	users, err := d.Users()
	require.NoError(t, err)
	require.Len(t, users, 1, "only alice: %+v", users)
	require.Empty(t, users[0].Groups)
	_, field := code(t, d.AddToGroup("alice", "nosuch"))
	require.Equal(t, "group", field)
	_, field = code(t, d.SetPassword("alice", "short"))
	require.Equal(t, "password", field)
	_, field = code(t, d.SetDisabled("nobody", true))
	require.Equal(t, "name", field)
}

// One deployment's directory knows nothing of another's users.
func TestDeploymentsAreApart(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, "users")
	b, _ := setup(t, "users")
	require.NoError(t, a.Add(directory.User{Name: "alice", Groups: []string{"users"}}))
	users, err := b.Users()
	require.NoError(t, err)
	require.Empty(t, users)
	require.NoError(t, b.Add(directory.User{Name: "alice"}), "the same name in another deployment")
}

// BenchmarkUsers lists a directory of 10,000 users in 20 groups: whole, and a page of
// 100 (the first, and one in the middle), each answer encoded as the API sends it.
func BenchmarkUsers(b *testing.B) {
	groups := make([]string, 20)
	for i := range groups {
		groups[i] = fmt.Sprintf("group-%d", i)
	}
	r, pw := subtree(b, groups...)
	admin, err := testServer.Admin()
	require.NoError(b, err)
	defer admin.Close()
	members := make([][]string, len(groups))
	for i := range 10000 {
		name := fmt.Sprintf("user%05d", i)
		a := ldap.NewAddRequest("uid="+name+","+r.UsersDN, nil)
		a.Attribute("objectClass", []string{"inetOrgPerson"})
		a.Attribute("uid", []string{name})
		a.Attribute("cn", []string{name})
		a.Attribute("sn", []string{name})
		a.Attribute("mail", []string{name + "@acme.test"})
		require.NoError(b, admin.Add(a))
		members[i%len(groups)] = append(members[i%len(groups)], "uid="+name+","+r.UsersDN)
	}
	for i, g := range groups {
		m := ldap.NewModifyRequest("cn="+g+","+r.GroupsDN, nil)
		m.Add("member", members[i])
		require.NoError(b, admin.Modify(m))
	}
	d, err := directory.New(r, pw)
	require.NoError(b, err)
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			users, err := d.Users()
			if err != nil || len(users) != 10000 || len(users[0].Groups) != 1 {
				b.Fatalf("%v, %d users", err, len(users))
			}
			if _, err := json.Marshal(users); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, after := range []string{"", "user05000"} {
		b.Run("page-100-after-"+after, func(b *testing.B) {
			for b.Loop() {
				users, more, err := d.UsersPage(after, 100)
				if err != nil || len(users) != 100 || !more || len(users[0].Groups) != 1 || users[0].Name <= after {
					b.Fatalf("%v, %d users", err, len(users))
				}
				if _, err := json.Marshal(users); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A user imported with the userPassword value another directory stored signs in with
// the password it had there; a clear text value is refused and adds nobody.
func TestAddWithHashKeepsThePassword(t *testing.T) {
	t.Parallel()
	d, r := setup(t, "miniflux-users")
	salt := []byte("8bytesal")
	sum := sha1.Sum(append([]byte("old password of ada"), salt...))
	hash := "{SSHA}" + base64.StdEncoding.EncodeToString(append(sum[:], salt...))
	require.NoError(t, d.AddWithHash(directory.User{Name: "ada", Groups: []string{"miniflux-users"}}, hash))
	require.NoError(t, bind(t, r, "ada", "old password of ada"))
	require.Error(t, bind(t, r, "ada", "another password"))

	err := d.AddWithHash(directory.User{Name: "bob"}, "clear text password")
	c, field := code(t, err)
	require.Equal(t, directory.CodeInvalid, c)
	require.Equal(t, "password_hash", field)
	require.NotContains(t, err.Error(), "clear text password")
	_, err = d.User("bob")
	require.Error(t, err, "a refused user is not added")
}

// The hashes UsersWithHashes reads move a user to another directory: there the user
// binds with the old password, in the same groups.
func TestUsersWithHashesMoveToAnotherDirectory(t *testing.T) {
	t.Parallel()
	src, _ := setup(t, "miniflux-users")
	require.NoError(t, src.Add(directory.User{Name: "ada", Email: "ada@acme.test", Groups: []string{"miniflux-users"}}))
	require.NoError(t, src.SetPassword("ada", "ada's old password"))
	require.NoError(t, src.Add(directory.User{Name: "bob"}))
	users, hashes, err := src.UsersWithHashes()
	require.NoError(t, err)
	require.Len(t, users, 2)
	require.True(t, strings.HasPrefix(hashes["ada"], "{"), "the value as the directory stored it: {SCHEME}hash")
	require.NotContains(t, hashes["ada"], "ada's old password")
	require.Empty(t, hashes["bob"], "a user without a password has no hash")

	dst, r := setup(t, "miniflux-users")
	for _, u := range users {
		if hashes[u.Name] != "" {
			require.NoError(t, dst.AddWithHash(u, hashes[u.Name]))
		}
	}
	require.NoError(t, bind(t, r, "ada", "ada's old password"))
	moved, err := dst.User("ada")
	require.NoError(t, err)
	require.Equal(t, []string{"miniflux-users"}, moved.Groups)
	require.Equal(t, "ada@acme.test", moved.Email)
}
