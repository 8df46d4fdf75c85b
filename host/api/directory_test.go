package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"
	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/ldaptest"
	"github.com/fedhost/fedhost/sdk"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// directoryBundle is the API on a real slapd, the openldap provider that makes each
// deployment's subtree and the embedded secret provider that keeps its bind password.
type directoryBundle struct {
	*bundle
	m    *plugins.Manager
	ldap *ldaptest.Server
}

func setupDirectory(t *testing.T) *directoryBundle {
	t.Helper()
	return setupDirectoryMail(t, nil, "")
}

// setupDirectoryMail is setupDirectory with, when relay is set, the relay provider of
// smtp run with those settings, and the host's public_url publicURL.
func setupDirectoryMail(t *testing.T, relay json.RawMessage, publicURL string) *directoryBundle {
	t.Helper()
	ctx := context.Background()
	srv, stop, err := ldaptest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(stop)
	dir := t.TempDir()
	lock := plugins.Lock{}
	pkgs := map[string]string{"fedhost-resource-openldap": "../../plugins/resources/openldap", "fedhost-resource-embedded": "../../plugins/resources/embedded"}
	environment := []config.Resource{{Type: contract.Secret, Provider: "embedded"}, {Type: contract.LDAP, Provider: "openldap"}}
	if relay != nil {
		pkgs["fedhost-resource-relay"] = "../../plugins/resources/relay"
		environment = append(environment, config.Resource{Type: contract.SMTP, Provider: "relay"})
	}
	for name, pkg := range pkgs {
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, out)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(dir))
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	settings := func(d sdk.Description) (json.RawMessage, bool) {
		if d.Name == "openldap" {
			return fmt.Appendf(nil, `{"url":%q,"base_dn":%q,"admin_dn":%q,"admin_password_file":%q}`, srv.URL, srv.BaseDN, srv.AdminDN, srv.AdminPasswordFile), true
		}
		if d.Name == "relay" {
			return relay, true
		}
		return nil, true
	}
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir(), Settings: settings})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail})
	engine := deploy.New(deploy.Options{Store: st, Plugins: m, Audit: trail,
		Environment: environment})
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail, Version: "1.2.3", PublicURL: publicURL})
	return &directoryBundle{bundle: &bundle{app: app, st: st, accounts: accounts, trail: trail}, m: m, ldap: srv}
}

func (b *directoryBundle) client(t *testing.T, name string) *resource.Client {
	t.Helper()
	p, ok := b.m.Find(sdk.KindResource, name, "")
	require.True(t, ok, name)
	c, err := p.Client()
	require.NoError(t, err)
	return c.Resource()
}

// withDirectory has the openldap provider make the deployment's subtree with groups and
// records it as the engine does: the directory row, its bind password in the secret
// resource.
func (b *directoryBundle) withDirectory(t *testing.T, d api.Deployment, groups ...string) contract.LDAPResult {
	t.Helper()
	ctx := context.Background()
	spec, _ := json.Marshal(contract.LDAPRequest{Groups: groups})
	res, err := b.client(t, "openldap").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: deploy.DirectoryResource, Type: contract.LDAP, Spec: spec})
	require.NoError(t, err)
	var r contract.LDAPResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	secretSpec, _ := json.Marshal(contract.SecretRequest{Files: map[string]contract.SecretFile{"bind-password": {Supplied: true}}})
	kept, err := b.client(t, "embedded").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: "directory-creds", Type: contract.Secret,
		Spec: secretSpec, Secrets: map[string][]byte{"bind-password": res.Secrets[r.BindPassword.Secret]}})
	require.NoError(t, err)
	var sr contract.SecretResult
	require.NoError(t, json.Unmarshal(kept.Data, &sr))
	ref := sr.Files["bind-password"].Ref
	r.BindPassword = contract.SecretRef{Secret: ref}
	raw, _ := json.Marshal(r)
	refs, _ := json.Marshal(map[string]string{"bind-password": ref})
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: deploy.DirectoryResource, Type: contract.LDAP, Provider: "openldap",
		Spec: string(spec), Result: string(raw), SecretInstance: "directory-creds", SecretRefs: string(refs), State: store.ResourceProvisioned}))
	return r
}

func (b *directoryBundle) deployment(t *testing.T, cl client, namespace string) api.Deployment {
	t.Helper()
	status, body := b.do(t, cl, "POST", "/api/v1/deployments", `{"namespace":"`+namespace+`"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	return d
}

func (b *directoryBundle) bind(t *testing.T, r contract.LDAPResult, name, password string) error {
	t.Helper()
	c, err := ldap.DialURL(r.URL)
	require.NoError(t, err)
	defer c.Close()
	return c.Bind("uid="+name+","+r.UsersDN, password)
}

func tokenOf(t *testing.T, link api.PasswordLink) string {
	t.Helper()
	_, token, ok := strings.Cut(link.URL, api.PasswordPage+"#")
	require.True(t, ok, "the link opens the password page: %s", link.URL)
	return token
}

// The operator adds a user with an invitation link, the user sets a password with it
// (once), signs in to the directory, is disabled and cannot, enabled, regrouped, reset,
// deleted; another operator gets nothing; every change is audited without a password
// or a token.
func TestDirectoryUsersThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setupDirectory(t)
	alice, bob := b.user(t, "alice", false), b.user(t, "bob", false)
	d := b.deployment(t, alice, "acme")
	base := "/api/v1/deployments/" + d.ID
	status, body := b.do(t, alice, "GET", base+"/users", "")
	require.Equal(t, http.StatusNotFound, status, "no directory yet: %s", body)
	require.Equal(t, "not_found", errorCode(t, body))
	r := b.withDirectory(t, d, "miniflux-users", "miniflux-admins")

	status, body = b.do(t, alice, "POST", base+"/users", `{"name":"carol","display_name":"Carol","email":"carol@acme.test","groups":["miniflux-users"]}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var added api.NewUserAnswer
	require.NoError(t, json.Unmarshal(body, &added))
	require.Equal(t, []string{"miniflux-users"}, added.User.Groups)
	require.Equal(t, "invitation", added.Link.Purpose)
	token := tokenOf(t, added.Link)

	status, body = b.do(t, alice, "GET", base+"/users", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var users []api.DirectoryUser
	require.NoError(t, json.Unmarshal(body, &users))
	require.Len(t, users, 1)
	require.NotNil(t, users[0].PendingLink)
	require.NotContains(t, string(body), token, "a listing never shows a link's token")

	status, body = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+token+`","password":"short"}`)
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	status, body = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+token+`","password":"carol's good password"}`)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	require.NoError(t, b.bind(t, r, "carol", "carol's good password"))
	status, body = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+token+`","password":"another password"}`)
	require.Equal(t, http.StatusNotFound, status, "a link works once: %s", body)
	require.Equal(t, "link_invalid", errorCode(t, body))

	status, body = b.do(t, alice, "POST", base+"/users/carol/disable", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Error(t, b.bind(t, r, "carol", "carol's good password"), "a disabled user cannot sign in")
	status, _ = b.do(t, alice, "POST", base+"/users/carol/enable", "")
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, b.bind(t, r, "carol", "carol's good password"))

	status, body = b.do(t, alice, "PUT", base+"/users/carol/groups/miniflux-admins", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var u api.DirectoryUser
	require.NoError(t, json.Unmarshal(body, &u))
	require.Equal(t, []string{"miniflux-admins", "miniflux-users"}, u.Groups)
	status, body = b.do(t, alice, "DELETE", base+"/users/carol/groups/miniflux-users", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, body = b.do(t, alice, "GET", base+"/groups", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var groups []api.DirectoryGroup
	require.NoError(t, json.Unmarshal(body, &groups))
	require.Equal(t, []api.DirectoryGroup{{Name: "miniflux-admins", Members: []string{"carol"}, Roles: []api.GroupRole{}}, {Name: "miniflux-users", Members: []string{}, Roles: []api.GroupRole{}}}, groups)

	status, body = b.do(t, alice, "POST", base+"/users/carol/reset", "")
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var reset api.PasswordLink
	require.NoError(t, json.Unmarshal(body, &reset))
	resetToken := tokenOf(t, reset)

	for _, call := range []struct{ method, path string }{
		{"GET", base + "/users"}, {"POST", base + "/users"}, {"GET", base + "/groups"}, {"POST", base + "/users/carol/disable"},
		{"POST", base + "/users/carol/reset"}, {"DELETE", base + "/users/carol"}, {"PUT", base + "/users/carol/groups/miniflux-users"},
	} {
		status, body = b.do(t, bob, call.method, call.path, `{"name":"mallory"}`)
		require.Equal(t, http.StatusForbidden, status, "%s %s: %s", call.method, call.path, body)
	}

	status, body = b.do(t, alice, "DELETE", base+"/users/carol", "")
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	require.Error(t, b.bind(t, r, "carol", "carol's good password"))
	status, _ = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+resetToken+`","password":"carol's new password"}`)
	require.Equal(t, http.StatusNotFound, status, "a deleted user's link stops working")

	events, err := b.st.AuditEvents(context.Background(), 0, 1000)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, e := range events {
		raw, _ := json.Marshal(e)
		for _, secret := range []string{token, resetToken, "good password", "new password"} {
			require.NotContains(t, string(raw), secret)
		}
		if e.Subject == "carol" && e.Result == string(audit.ResultOK) {
			seen[e.Action] = true
		}
	}
	for _, action := range []string{"directory_user.add", "directory_user.set_password", "directory_user.disable", "directory_user.enable",
		"directory_user.group_add", "directory_user.group_remove", "directory_user.reset", "directory_user.delete"} {
		require.True(t, seen[action], "audited: %s (%v)", action, seen)
	}
}

// Bad input is refused naming the field, and leaves nothing in the directory.
// The users come a page at a time when limit or after is given, the X-Next-After header
// naming the next page's after; without either, all of them.
func TestDirectoryUsersInPages(t *testing.T) {
	t.Parallel()
	b := setupDirectory(t)
	alice := b.user(t, "alice", false)
	d := b.deployment(t, alice, "pages")
	base := "/api/v1/deployments/" + d.ID + "/users"
	b.withDirectory(t, d, "staff")
	for _, name := range []string{"erin", "bob", "dave", "carol"} {
		status, body := b.do(t, alice, "POST", base, `{"name":"`+name+`","groups":["staff"]}`)
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}
	page := func(query string) ([]string, string) {
		req := httptest.NewRequest("GET", base+query, nil)
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: alice.cookie})
		resp, err := b.app.Test(req, -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var users []api.DirectoryUser
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&users))
		var names []string
		for _, u := range users {
			require.Equal(t, []string{"staff"}, u.Groups)
			require.NotNil(t, u.PendingLink, "the invitation of %s", u.Name)
			names = append(names, u.Name)
		}
		return names, resp.Header.Get(api.NextAfterHeader)
	}
	names, next := page("?limit=3")
	require.Equal(t, []string{"bob", "carol", "dave"}, names)
	require.Equal(t, "dave", next)
	names, next = page("?limit=3&after=" + next)
	require.Equal(t, []string{"erin"}, names)
	require.Empty(t, next)
	names, next = page("?after=carol")
	require.Equal(t, []string{"dave", "erin"}, names)
	require.Empty(t, next)
	names, next = page("")
	require.Equal(t, []string{"bob", "carol", "dave", "erin"}, names)
	require.Empty(t, next)
	for _, bad := range []string{"?limit=0", "?limit=1001", "?after=Not%20a%20name"} {
		status, body := b.do(t, alice, "GET", base+bad, "")
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", bad, body)
	}
}

func TestDirectoryUsersRefuseBadInput(t *testing.T) {
	t.Parallel()
	b := setupDirectory(t)
	alice := b.user(t, "alice", false)
	d := b.deployment(t, alice, "acme")
	b.withDirectory(t, d, "miniflux-users")
	base := "/api/v1/deployments/" + d.ID
	status, body := b.do(t, alice, "POST", base+"/users", `{"name":"dave"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	for _, c := range []struct {
		body, location string
		status         int
	}{
		{`{"name":"with spaces"}`, "/name", http.StatusBadRequest},
		{`{"name":"` + strings.Repeat("a", 300) + `"}`, "/name", http.StatusBadRequest},
		{`{"name":"dave"}`, "/name", http.StatusConflict},
		{`{"name":"erin","groups":["miniflux-users","nosuch"]}`, "/groups/1", http.StatusNotFound},
		{`{"name":"erin","email":"no address"}`, "/email", http.StatusBadRequest},
	} {
		status, body := b.do(t, alice, "POST", base+"/users", c.body)
		require.Equal(t, c.status, status, "%s: %s", c.body, body)
		var answer struct {
			Error api.Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &answer))
		require.Equal(t, c.location, answer.Error.Location, "%s", body)
		require.NotContains(t, answer.Error.Message, "with spaces")
	}
	status, body = b.do(t, alice, "GET", base+"/users", "")
	require.Equal(t, http.StatusOK, status)
	var users []api.DirectoryUser
	require.NoError(t, json.Unmarshal(body, &users))
	require.Len(t, users, 1, "only dave: %s", body)
	status, _ = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+strings.Repeat("x", 43)+`","password":"a long enough password"}`)
	require.Equal(t, http.StatusNotFound, status)
	// One address may try 10 links a minute.
	for range 9 {
		status, _ = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+strings.Repeat("y", 43)+`","password":"a long enough password"}`)
		require.Equal(t, http.StatusNotFound, status)
	}
	status, body = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+strings.Repeat("y", 43)+`","password":"a long enough password"}`)
	require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
	require.Equal(t, "rate_limited", errorCode(t, body))
}
