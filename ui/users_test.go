package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/go-ldap/ldap/v3"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/ldaptest"
	"github.com/fedhost/fedhost/sdk"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
	"github.com/fedhost/fedhost/ui"
)

// setupDirectory is setup with a real slapd, the openldap provider that makes a
// deployment's subtree and the embedded secret provider that keeps its bind password.
func setupDirectory(t *testing.T) (*bundle, *plugins.Manager) {
	t.Helper()
	return setupDirectoryMail(t, nil)
}

// setupDirectoryMail is setupDirectory with, when relay is set, the relay provider of
// smtp run with those settings.
func setupDirectoryMail(t *testing.T, relay json.RawMessage) (*bundle, *plugins.Manager) {
	t.Helper()
	ctx := context.Background()
	srv, stop, err := ldaptest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(stop)
	dir := t.TempDir()
	lock := plugins.Lock{}
	pkgs := map[string]string{"fedhost-resource-openldap": "../plugins/resources/openldap", "fedhost-resource-embedded": "../plugins/resources/embedded"}
	environment := []config.Resource{{Type: contract.Secret, Provider: "embedded"}, {Type: contract.LDAP, Provider: "openldap"}}
	if relay != nil {
		pkgs["fedhost-resource-relay"] = "../plugins/resources/relay"
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
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir(), Settings: func(d sdk.Description) (json.RawMessage, bool) {
		if d.Name == "openldap" {
			return fmt.Appendf(nil, `{"url":%q,"base_dn":%q,"admin_dn":%q,"admin_password_file":%q}`, srv.URL, srv.BaseDN, srv.AdminDN, srv.AdminPasswordFile), true
		}
		if d.Name == "relay" {
			return relay, true
		}
		return nil, true
	}})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	b := setupWith(t, func(o *deploy.Options, d *ui.Deps) {
		o.Plugins = m
		o.Environment = environment
		d.Plugins = m
	})
	return b, m
}

func resourceClient(t *testing.T, m *plugins.Manager, name string) *resource.Client {
	t.Helper()
	p, ok := m.Find(sdk.KindResource, name, "")
	require.True(t, ok, name)
	c, err := p.Client()
	require.NoError(t, err)
	return c.Resource()
}

// withDirectory records a directory for d as the engine does: the subtree by the
// openldap provider, its bind password kept by the secret provider, the directory row.
func withDirectory(t *testing.T, b *bundle, m *plugins.Manager, d store.Deployment, groups ...string) contract.LDAPResult {
	t.Helper()
	ctx := context.Background()
	spec, _ := json.Marshal(contract.LDAPRequest{Groups: groups})
	res, err := resourceClient(t, m, "openldap").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: deploy.DirectoryResource, Type: contract.LDAP, Spec: spec})
	require.NoError(t, err)
	var r contract.LDAPResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	secretSpec, _ := json.Marshal(contract.SecretRequest{Files: map[string]contract.SecretFile{"bind-password": {Supplied: true}}})
	kept, err := resourceClient(t, m, "embedded").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: "directory-creds", Type: contract.Secret,
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

var (
	linkRE      = regexp.MustCompile(`value="(http://[^"]+/set-password#([A-Za-z0-9_-]{43}))"`)
	formTokenRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// setPassword opens the public page as a browser without a session and sends its form.
func setPassword(t *testing.T, b *bundle, token, password, confirm string) (int, string) {
	t.Helper()
	res, body := b.do(t, httptest.NewRequest(http.MethodGet, "/set-password", nil))
	require.Equal(t, http.StatusOK, res.StatusCode)
	m := formTokenRE.FindStringSubmatch(body)
	require.NotNil(t, m, "the page's form has its token")
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "fedhost_link_csrf" {
			cookie = c
		}
	}
	require.NotNil(t, cookie)
	require.True(t, cookie.HttpOnly)
	form := url.Values{"csrf": {m[1]}, "token": {token}, "password": {password}, "confirm": {confirm}}
	req := httptest.NewRequest(http.MethodPost, "/set-password", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	res, body = b.do(t, req)
	return res.StatusCode, body
}

func bindAs(t *testing.T, r contract.LDAPResult, name, password string) error {
	t.Helper()
	c, err := ldap.DialURL(r.URL)
	require.NoError(t, err)
	defer c.Close()
	return c.Bind("uid="+name+","+r.UsersDN, password)
}

// The operator adds a user on the users page and gets the link once; the user sets a
// password on the public page (not twice, not without the page's token); the operator
// disables, regroups and deletes the user; bob sees nothing of alice's users.
func TestUsersPage(t *testing.T) {
	t.Parallel()
	b, m := setupDirectory(t)
	alice := b.as(t, "alice")
	d := b.create(t, "alice", "acme")
	res, _ := alice.get(t, "/deployments/"+d.ID+"/users")
	require.Equal(t, http.StatusNotFound, res.StatusCode, "no directory yet")
	r := withDirectory(t, b, m, d, "miniflux-users", "miniflux-admins")

	res, body := alice.get(t, "/deployments/"+d.ID+"/users")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	requireLabelled(t, body)
	res, body = alice.post(t, "/deployments/"+d.ID+"/users", url.Values{"name": {"carol"}, "display_name": {"Carol"}, "groups": {"miniflux-users"}})
	require.Equal(t, http.StatusCreated, res.StatusCode, body)
	link := linkRE.FindStringSubmatch(body)
	require.NotNil(t, link, "the page shows the link once: %s", body)
	token := link[2]
	res, body = alice.get(t, "/deployments/"+d.ID+"/users")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotContains(t, body, token, "the link is shown only once")
	require.Contains(t, body, "invited")

	res, body = alice.post(t, "/deployments/"+d.ID+"/users", url.Values{"name": {"with spaces"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, `aria-invalid="true"`)

	status, body := setPassword(t, b, token, "a good long password", "another password")
	require.Equal(t, http.StatusBadRequest, status, body)
	status, body = setPassword(t, b, token, "a good long password", "a good long password")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Your password is set")
	require.NoError(t, bindAs(t, r, "carol", "a good long password"))
	status, _ = setPassword(t, b, token, "a second password", "a second password")
	require.Equal(t, http.StatusNotFound, status, "a link works once")
	form := url.Values{"csrf": {"made-up"}, "token": {token}, "password": {"a second password"}, "confirm": {"a second password"}}
	req := httptest.NewRequest(http.MethodPost, "/set-password", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, _ = b.do(t, req)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the form without its page's token")

	res, _ = alice.post(t, "/deployments/"+d.ID+"/users/carol/disable", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Error(t, bindAs(t, r, "carol", "a good long password"))
	res, _ = alice.post(t, "/deployments/"+d.ID+"/users/carol/groups", url.Values{"op": {"add"}, "group": {"miniflux-admins"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, body = alice.get(t, "/deployments/"+d.ID+"/users")
	require.Contains(t, body, "Take carol out of miniflux-admins")
	require.Contains(t, body, "disabled")

	bob := b.as(t, "bob")
	res, _ = bob.get(t, "/deployments/"+d.ID+"/users")
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	res, _ = bob.post(t, "/deployments/"+d.ID+"/users/carol/delete", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	res, _ = alice.post(t, "/deployments/"+d.ID+"/users/carol/delete", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, body = alice.get(t, "/deployments/"+d.ID+"/users")
	require.NotContains(t, body, "user-carol")

	for _, e := range b.events(t) {
		raw, _ := json.Marshal(e)
		require.NotContains(t, string(raw), token)
		require.NotContains(t, string(raw), "good long password")
	}
	audited := map[string]bool{}
	for _, e := range b.events(t) {
		if e.Subject == "carol" && e.Result == "ok" && e.DeploymentID == d.ID {
			audited[e.Action] = true
		}
	}
	for _, action := range []string{"directory_user.add", "directory_user.set_password", "directory_user.disable", "directory_user.group_add", "directory_user.delete"} {
		require.True(t, audited[action], "audited: %s (%v)", action, audited)
	}
}

// TestUsersScreenshots saves PNGs of the users page and the set-password page into
// FEDHOST_UI_SHOTS.
func TestUsersScreenshots(t *testing.T) {
	dir := os.Getenv("FEDHOST_UI_SHOTS")
	if dir == "" {
		t.Skip("set FEDHOST_UI_SHOTS=/tmp/ui-shots to save screenshots of the users pages (needs chromium)")
	}
	exe, err := exec.LookPath("chromium")
	require.NoError(t, err, "install the Debian package chromium")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	b, m := setupDirectory(t)
	d := b.create(t, "alice", "acme")
	withDirectory(t, b, m, d, "miniflux-users", "miniflux-admins")
	alice := b.as(t, "alice")
	for _, u := range []url.Values{
		{"name": {"alice.liddell"}, "display_name": {"Alice Liddell"}, "email": {"alice@acme.example"}, "groups": {"miniflux-users", "miniflux-admins"}},
		{"name": {"bob"}, "email": {"bob@acme.example"}, "groups": {"miniflux-users"}},
		{"name": {"carol"}, "display_name": {"Carol"}},
	} {
		res, body := alice.post(t, "/deployments/"+d.ID+"/users", u)
		require.Equal(t, http.StatusCreated, res.StatusCode, body)
	}
	res, _ := alice.post(t, "/deployments/"+d.ID+"/users/bob/disable", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	tab, shot := shooter(t, b, exe, dir)
	shot("users-narrow", "/deployments/"+d.ID+"/users", 420)
	shot("users", "/deployments/"+d.ID+"/users", 1280)
	// A new link for carol, as the page shows it once.
	require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.CSS(`#user-carol form[action$="/reset"] button`)), chromedp.WaitVisible(chromedp.CSS(`input.link-once`))))
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users-link.png"), png, 0o644))
	shot("set-password", "/set-password#"+strings.Repeat("x", 43), 1280)
}
