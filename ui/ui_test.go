package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/ui"
)

// bundle is a UI on a fresh SQLite store, with a superuser and two operators.
type bundle struct {
	app    *fiber.App
	ui     *ui.UI
	st     *store.Store
	auth   *auth.Service
	engine *deploy.Engine
	users  map[string]auth.User
	pass   map[string]string
}

// fastHash keeps the tests quick; the parameters of production hashes are not under test.
var fastHash = auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func setup(t *testing.T) *bundle {
	t.Helper()
	// No plugins, so no catalog and no queue: the pages under test need neither.
	return setupWith(t, nil)
}

// setupWith is setup with changes to the engine's options and the UI's dependencies
// (Store, Audit and Auth are set before change, Engine after).
func setupWith(t *testing.T, change func(*deploy.Options, *ui.Deps)) *bundle {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	log := audit.New(st, audit.Options{})
	svc := auth.New(st, auth.Options{Audit: log, Params: fastHash})
	opts := deploy.Options{Store: st}
	deps := ui.Deps{Store: st, Auth: svc, Audit: log, Version: "test"}
	if change != nil {
		change(&opts, &deps)
	}
	engine := deploy.New(opts)
	deps.Engine = engine
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	pages := ui.New(deps)
	pages.Mount(app)

	b := &bundle{app: app, ui: pages, st: st, auth: svc, engine: engine, users: map[string]auth.User{}, pass: map[string]string{}}
	for _, u := range []struct {
		name      string
		superuser bool
	}{{"root", true}, {"alice", false}, {"bob", false}} {
		user, password, err := svc.CreateUser(ctx, u.name, u.superuser)
		require.NoError(t, err)
		b.users[u.name], b.pass[u.name] = user, password
	}
	return b
}

// client is a browser session of one user.
type client struct {
	b            *bundle
	cookie, csrf string
}

func (b *bundle) as(t *testing.T, name string) *client {
	t.Helper()
	ns, err := b.auth.NewSession(context.Background(), b.users[name].ID)
	require.NoError(t, err)
	return &client{b: b, cookie: ns.ID, csrf: ns.CSRFToken}
}

func (b *bundle) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := b.app.Test(req, -1)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}

func (c *client) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: c.cookie})
	return c.b.do(t, req)
}

// post sends form with the session's CSRF token unless form sets csrf itself.
func (c *client) post(t *testing.T, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", c.csrf)
	}
	return c.postRaw(t, path, form)
}

func (c *client) postRaw(t *testing.T, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: c.cookie})
	}
	return c.b.do(t, req)
}

var loginToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login posts the log-in form as a browser does: with the token and cookie of the page.
func (c *client) login(t *testing.T, form url.Values) (*http.Response, string) {
	t.Helper()
	res, body := c.b.do(t, httptest.NewRequest(http.MethodGet, "/login", nil))
	require.Equal(t, http.StatusOK, res.StatusCode)
	m := loginToken.FindStringSubmatch(body)
	require.NotNil(t, m, "the log-in form has a CSRF token")
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "fedhost_login" {
			cookie = ck
		}
	}
	require.NotNil(t, cookie, "the log-in page sets its token's cookie")
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	form.Set("csrf", m[1])
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	return c.b.do(t, req)
}

func (b *bundle) events(t *testing.T) []store.AuditEvent {
	t.Helper()
	events, err := b.st.AuditEvents(context.Background(), 0, 1000)
	require.NoError(t, err)
	return events
}

func (b *bundle) hasEvent(t *testing.T, want store.AuditEvent) bool {
	t.Helper()
	for _, e := range b.events(t) {
		if e.Action == want.Action && e.Result == want.Result && e.Actor == want.Actor &&
			(want.Issuer == "" || e.Issuer == want.Issuer) && (want.DeploymentID == "" || e.DeploymentID == want.DeploymentID) {
			return true
		}
	}
	return false
}

func (b *bundle) create(t *testing.T, owner, namespace string) store.Deployment {
	t.Helper()
	d, err := b.engine.Create(context.Background(), b.users[owner].ID, namespace+" site", namespace)
	require.NoError(t, err)
	return d
}

// requireLabelled checks that every visible control of page has a label naming its id.
func requireLabelled(t *testing.T, page string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	require.NoError(t, err)
	labels := map[string]bool{}
	var controls []map[string]string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attrs := map[string]string{"tag": n.Data}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
			}
			switch n.Data {
			case "label":
				labels[attrs["for"]] = true
			case "input", "select", "textarea":
				if attrs["type"] != "hidden" {
					controls = append(controls, attrs)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	require.NotEmpty(t, controls)
	for _, c := range controls {
		require.NotEmpty(t, c["id"], "a %s named %q has no id", c["tag"], c["name"])
		require.True(t, labels[c["id"]], "%s #%s has no label", c["tag"], c["id"])
	}
}

func TestLoginPageHasLabelledInputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, body := b.do(t, httptest.NewRequest(http.MethodGet, "/login?next=/deployments/x", nil))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `name="name"`)
	require.Contains(t, body, `name="password" type="password"`)
	require.Contains(t, body, `<button type="submit">Log in</button>`)
	require.Contains(t, body, `name="next" value="/deployments/x"`)
	requireLabelled(t, body)
}

func TestLoginWithWrongPasswordShowsErrorAndIsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := &client{b: b}
	res, body := anon.login(t, url.Values{"name": {"alice"}, "password": {"not-" + b.pass["alice"]}})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, body, "Wrong user name or password")
	require.Contains(t, body, `value="alice"`, "the name stays filled in")
	for _, ck := range res.Cookies() {
		require.NotEqual(t, ui.CookieName, ck.Name, "no session")
	}
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "user.login", Result: string(audit.ResultDenied), Actor: b.users["alice"].ID}))
}

// A log-in form posted from another site (no token, or a token without its cookie) is
// refused before the password is even checked: no one can be signed in to an account
// that is not theirs.
func TestLoginNeedsTheFormsToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := &client{b: b}
	for _, form := range []url.Values{
		{"name": {"alice"}, "password": {b.pass["alice"]}},
		{"name": {"alice"}, "password": {b.pass["alice"]}, "csrf": {"guessed"}},
	} {
		res, body := anon.postRaw(t, "/login", form)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		require.Contains(t, body, "This log-in form has expired or was sent from another site")
		for _, ck := range res.Cookies() {
			require.NotEqual(t, ui.CookieName, ck.Name, "no session")
		}
	}
	require.False(t, b.hasEvent(t, store.AuditEvent{Action: "user.login", Result: string(audit.ResultOK), Actor: b.users["alice"].ID}))
}

func TestLoginSetsSessionCookieAndGoesToNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := &client{b: b}
	res, _ := anon.login(t, url.Values{"name": {"alice"}, "password": {b.pass["alice"]}, "next": {"/deployments/new"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/deployments/new", res.Header.Get("Location"))
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == ui.CookieName {
			cookie = c
		}
	}
	require.NotNil(t, cookie)
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, cookie.SameSite)
	require.False(t, cookie.Secure, "the test server speaks plain http")

	alice := &client{b: b, cookie: cookie.Value}
	res, body := alice.get(t, "/deployments/new")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "Signed in as <strong>alice</strong>")

	t.Run("a next address off the site is ignored", func(t *testing.T) {
		res, _ := anon.login(t, url.Values{"name": {"bob"}, "password": {b.pass["bob"]}, "next": {"//evil.example/"}})
		require.Equal(t, "/deployments", res.Header.Get("Location"))
	})
}

func TestPagesSendBrowsersWithoutSessionToLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []*client{{b: b}, {b: b, cookie: "ended-or-forged"}} {
		res, _ := c.get(t, "/deployments/abc?x=1")
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, "/login?next="+url.QueryEscape("/deployments/abc?x=1"), res.Header.Get("Location"))
	}
}

func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.as(t, "alice")
	res, _ := alice.post(t, "/logout", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/login", res.Header.Get("Location"))
	res, _ = alice.get(t, "/deployments")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the old cookie no longer works")
}

func TestOperatorSeesOnlyOwnDeployments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, "alice", "alice-news")
	b.create(t, "bob", "bob-feeds")

	res, body := b.as(t, "alice").get(t, "/deployments")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "alice-news")
	require.NotContains(t, body, "bob-feeds")
	require.Contains(t, body, `href="/deployments/new"`)

	_, body = b.as(t, "root").get(t, "/deployments")
	require.Contains(t, body, "alice-news")
	require.Contains(t, body, "bob-feeds")
}

func TestOtherOperatorIsRefusedAndAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, "alice", "alice-news")
	bob := b.as(t, "bob")

	for _, path := range []string{"/deployments/" + d.ID, "/deployments/" + d.ID + "/configure", "/deployments/" + d.ID + "/builds", "/deployments/" + d.ID + "/policy"} {
		res, body := bob.get(t, path)
		require.Equal(t, http.StatusForbidden, res.StatusCode, path)
		require.NotContains(t, body, "alice-news", path)
	}
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.read", Result: string(audit.ResultDenied),
		Actor: b.users["bob"].ID, Issuer: string(audit.IssuerSession), DeploymentID: d.ID}))

	res, _ := bob.post(t, "/deployments/"+d.ID+"/destroy", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.destroy", Result: string(audit.ResultDenied),
		Actor: b.users["bob"].ID, DeploymentID: d.ID}))

	res, body := b.as(t, "alice").get(t, "/deployments/"+d.ID)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `href="/deployments/`+d.ID+`/configure"`)

	res, _ = b.as(t, "root").get(t, "/deployments/"+d.ID)
	require.Equal(t, http.StatusOK, res.StatusCode, "a superuser sees every deployment")

	res, _ = bob.get(t, "/deployments/no-such-id")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

func TestPostWithoutCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.as(t, "alice")
	for _, token := range []string{"", "forged"} {
		form := url.Values{"namespace": {"alice-news"}}
		if token != "" {
			form.Set("csrf", token)
		}
		res, _ := alice.postRaw(t, "/deployments/new", form)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	}
	list, err := b.st.ListDeployments(context.Background(), "")
	require.NoError(t, err)
	require.Empty(t, list, "a refused form changes nothing")
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "session.csrf", Result: string(audit.ResultDenied), Actor: b.users["alice"].ID}))

	res, _ := alice.postRaw(t, "/logout", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "not even a logout goes without the token")
}

func TestCreateDeployment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.as(t, "alice")
	res, body := alice.get(t, "/deployments/new")
	require.Equal(t, http.StatusOK, res.StatusCode)
	requireLabelled(t, body)

	res, _ = alice.post(t, "/deployments/new", url.Values{"namespace": {"alice-news"}, "name": {"News"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	list, err := b.st.ListDeployments(context.Background(), b.users["alice"].ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "/deployments/"+list[0].ID, res.Header.Get("Location"))
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.create", Result: string(audit.ResultOK), Actor: b.users["alice"].ID, DeploymentID: list[0].ID}))

	res, body = b.as(t, "bob").post(t, "/deployments/new", url.Values{"namespace": {"alice-news"}})
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, body, `<p class="field-error" id="new-namespace-error">this namespace is taken by another deployment`)
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.create", Result: string(audit.ResultInvalid), Actor: b.users["bob"].ID}))
}

func TestDeploymentPageLinksNodeAddresses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, "alice", "alice-news")
	require.NoError(t, b.st.PutResource(context.Background(), store.Resource{
		DeploymentID: d.ID, Name: "miniflux-web", App: "miniflux", Type: "instance", State: store.ResourceProvisioned,
		Result: `{"state":"running","addresses":{"http":"127.0.0.1:8080"}}`,
	}))
	_, body := b.as(t, "alice").get(t, "/deployments/"+d.ID)
	require.Contains(t, body, `<a class="node-address" href="http://127.0.0.1:8080/">`)
	for _, op := range []string{"suspend", "resume"} {
		require.Contains(t, body, `action="/deployments/`+d.ID+`/`+op+`"`)
	}
	require.Contains(t, body, `href="/deployments/`+d.ID+`/destroy"`)
}

func TestBuildPageShowsProgressStateAndLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.create(t, "alice", "alice-news")
	build, err := b.st.SubmitBuild(ctx, d.ID, store.OperationDeploy, store.Submission{Config: "{}", SecretRefs: "{}"})
	require.NoError(t, err)
	_, err = b.st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: build.ID, Step: "plan", Level: store.LevelInfo, Message: "asking the enabled apps", Progress: 2})
	require.NoError(t, err)

	res, body := b.as(t, "alice").get(t, "/builds/"+build.ID)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `<progress id="progress" max="100" value="2">`)
	require.Regexp(t, `id="build-state"[^>]*>queued<`, body)
	require.Contains(t, body, `<ol id="log"`)
	require.Contains(t, body, `data-seq="1"`)
	require.Contains(t, body, "asking the enabled apps")
	require.Contains(t, body, `data-last-seq="1"`)
	require.Contains(t, body, `src="/static/build.js"`)

	res, _ = b.as(t, "bob").get(t, "/builds/"+build.ID)
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.True(t, b.hasBuildRefusal(t, "build.read", "bob", d.ID, build.ID), "the refusal names the build and its deployment")

	res, js := b.do(t, httptest.NewRequest(http.MethodGet, "/static/build.js", nil))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, js, `"/events"`)
}

func TestUpdatePolicy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, "alice", "alice-news")
	alice := b.as(t, "alice")
	res, body := alice.get(t, "/deployments/"+d.ID+"/policy")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `value="manual" checked`)
	requireLabelled(t, body)

	res, body = alice.post(t, "/deployments/"+d.ID+"/policy", url.Values{"policy": {"window"}, "window_start": {"25:00"}, "window_minutes": {"60"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, `id="window-start-error"`)

	res, _ = alice.post(t, "/deployments/"+d.ID+"/policy", url.Values{"policy": {"window"}, "window_start": {"02:30"}, "window_minutes": {"60"}, "time_zone": {"Europe/Amsterdam"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	stored, err := b.engine.Deployment(context.Background(), d.ID)
	require.NoError(t, err)
	require.Equal(t, deploy.UpdatePolicy{Policy: "window", WindowStart: "02:30", WindowMinutes: 60, TimeZone: "Europe/Amsterdam"}, deploy.PolicyOf(stored))
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.update_policy", Result: string(audit.ResultOK), Actor: b.users["alice"].ID, DeploymentID: d.ID}))
}

func TestAdminPagesRefuseOperators(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, root := b.as(t, "alice"), b.as(t, "root")
	for _, path := range []string{"/admin/operators", "/admin/plugins", "/admin/catalog", "/admin/jobs"} {
		res, body := alice.get(t, path)
		require.Equal(t, http.StatusForbidden, res.StatusCode, path)
		require.Contains(t, body, "Only superusers")
		res, _ = root.get(t, path)
		require.Equal(t, http.StatusOK, res.StatusCode, path)
	}
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "admin.jobs", Result: string(audit.ResultDenied), Actor: b.users["alice"].ID}))

	res, _ := alice.post(t, "/admin/operators", url.Values{"name": {"mallory"}, "superuser": {"true"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	_, err := b.st.UserByName(context.Background(), "mallory")
	require.ErrorIs(t, err, store.ErrNotFound)

	res, body := root.post(t, "/admin/operators", url.Values{"name": {"carol"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Contains(t, body, "User <strong>carol</strong> is created")
}

func TestJobsListsBuildsOfEveryDeployment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.create(t, "bob", "bob-feeds")
	build, err := b.st.SubmitBuild(ctx, d.ID, store.OperationDeploy, store.Submission{Config: "{}", SecretRefs: "{}"})
	require.NoError(t, err)
	_, body := b.as(t, "root").get(t, "/admin/jobs")
	require.Contains(t, body, `href="/builds/`+build.ID+`"`)
	require.Contains(t, body, `action="/admin/jobs/`+build.ID+`/cancel"`, "a queued build can be canceled")

	res, _ := b.as(t, "bob").post(t, "/admin/jobs/"+build.ID+"/cancel", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.True(t, b.hasBuildRefusal(t, "build.cancel", "bob", d.ID, build.ID), "the refusal names the build and its deployment")
}

// The jobs page shows 50 builds and links to the older ones: page by page, every build
// once, newest first.
func TestJobsPageIsPaged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.create(t, "bob", "bob-feeds")
	want := map[string]bool{}
	for range 57 {
		build, err := b.st.CreateBuild(ctx, d.ID)
		require.NoError(t, err)
		require.NoError(t, b.st.SetBuildState(ctx, build.ID, store.BuildSucceeded, ""))
		want[build.ID] = true
	}
	link := regexp.MustCompile(`href="/admin/jobs\?before=([^"]+)"`)
	builds := regexp.MustCompile(`href="/builds/([^"]+)"`)
	seen := map[string]bool{}
	var pages []int
	for path := "/admin/jobs"; path != ""; {
		require.Less(t, len(pages), 3, "the pages do not end")
		_, body := b.as(t, "root").get(t, path)
		ids := builds.FindAllStringSubmatch(body, -1)
		pages = append(pages, len(ids))
		for _, m := range ids {
			require.False(t, seen[m[1]], "build %s on two pages", m[1])
			seen[m[1]] = true
		}
		path = ""
		if m := link.FindStringSubmatch(body); m != nil {
			path = "/admin/jobs?before=" + m[1]
		}
	}
	require.Equal(t, []int{50, 7}, pages)
	require.Equal(t, want, seen)
}

// hasBuildRefusal reports whether user's refused action on build (of deployment) is in
// the audit trail under both ids.
func (b *bundle) hasBuildRefusal(t *testing.T, action, user, deployment, build string) bool {
	t.Helper()
	for _, e := range b.events(t) {
		if e.Action == action && e.Result == string(audit.ResultDenied) && e.Actor == b.users[user].ID && e.DeploymentID == deployment && e.BuildID == build {
			return true
		}
	}
	return false
}

func TestAccountCreatesTokenAndShowsOwnActivity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, "alice", "alice-news")
	alice := b.as(t, "alice")
	_, _ = alice.post(t, "/deployments/new", url.Values{"namespace": {"alice-two"}})
	res, body := alice.post(t, "/account/tokens", url.Values{"name": {"backup script"}, "lifetime_days": {"30"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Contains(t, body, `value="fh_`)
	require.Contains(t, body, "deployment.create")
	requireLabelled(t, body)

	_, body = b.as(t, "bob").get(t, "/account")
	require.NotContains(t, body, "deployment.create", "bob sees only his own activity")
}

func TestConfigureWithoutCatalogSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, "alice", "alice-news")
	res, body := b.as(t, "alice").get(t, "/deployments/"+d.ID+"/configure")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "No catalog is loaded")
}
