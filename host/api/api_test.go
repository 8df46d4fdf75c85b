package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
)

type bundle struct {
	app      *fiber.App
	st       *store.Store
	accounts *auth.Service
	trail    *audit.Log
}

// setup returns the API on a real store (SQLite), accounts and audit trail, with a
// plugin manager of an empty plugin directory: enough for everything but builds.
func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, api.DefaultServer, deploy.Options{})
}

// setupWith is setup with the server settings srv and the engine options of opts
// (Store and Plugins are set here).
func setupWith(t *testing.T, srv api.Server, opts deploy.Options) *bundle {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: t.TempDir(), DataDir: t.TempDir()})
	require.NoError(t, err)
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail})
	opts.Store, opts.Plugins = st, m
	engine := deploy.New(opts)
	app := fiber.New(api.Config(srv))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail, Version: "1.2.3"})
	return &bundle{app: app, st: st, accounts: accounts, trail: trail}
}

// client is a browser session or a script with a token.
type client struct {
	cookie, csrf, token string
}

func (b *bundle) do(t *testing.T, cl client, method, path, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	req.Header.Set("Content-Type", "application/json")
	if cl.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: cl.cookie})
	}
	if cl.csrf != "" {
		req.Header.Set("X-CSRF-Token", cl.csrf)
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	resp, err := b.app.Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// user creates an operator and signs it in.
func (b *bundle) user(t *testing.T, name string, superuser bool) client {
	t.Helper()
	_, password, err := b.accounts.CreateUser(context.Background(), name, superuser)
	require.NoError(t, err)
	req := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(`{"name":"`+name+`","password":"`+password+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.app.Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var login struct {
		CSRF string `json:"csrf_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&login))
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie {
			require.True(t, c.HttpOnly)
			return client{cookie: c.Value, csrf: login.CSRF}
		}
	}
	t.Fatalf("no session cookie")
	return client{}
}

func errorCode(t *testing.T, body []byte) string {
	var answer struct {
		Error *api.Error `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &answer), "%s", body)
	require.NotNil(t, answer.Error, "%s", body)
	return answer.Error.Code
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	status, body := setup(t).do(t, client{}, "GET", "/healthz", "")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"status": "ok", "version": "1.2.3"}`, string(body))
}

func TestAnonymousCallsAreRefusedAndAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, body := b.do(t, client{}, "GET", "/api/v1/plugins", "")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "unauthenticated", errorCode(t, body))
	status, _ = b.do(t, client{}, "POST", "/api/v1/login", `{"name":"nobody","password":"wrong-guess"}`)
	require.Equal(t, http.StatusUnauthorized, status)
	events, err := b.st.AuditEvents(context.Background(), 0, 100)
	require.NoError(t, err)
	var denied bool
	for _, e := range events {
		denied = denied || (e.Result == "denied" && e.Actor == "")
		require.NotContains(t, e.Reason, "wrong-guess")
	}
	require.True(t, denied, "the anonymous refusal is in the audit trail: %+v", events)
}

func TestOperatorsSeeOnlyTheirOwnDeployments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, bob, root := b.user(t, "alice", false), b.user(t, "bob", false), b.user(t, "root", true)

	status, body := b.do(t, client{cookie: alice.cookie}, "POST", "/api/v1/deployments", `{"namespace":"alice"}`)
	require.Equal(t, http.StatusForbidden, status, "a session call without its CSRF token")
	require.Equal(t, "authz_denied", errorCode(t, body))

	status, body = b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"alice"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	status, _ = b.do(t, bob, "POST", "/api/v1/deployments", `{"namespace":"bob"}`)
	require.Equal(t, http.StatusCreated, status)

	status, _ = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID, "")
	require.Equal(t, http.StatusOK, status)
	for _, call := range []struct{ method, path string }{
		{"GET", "/api/v1/deployments/" + d.ID},
		{"POST", "/api/v1/deployments/" + d.ID + "/submit"},
		{"DELETE", "/api/v1/deployments/" + d.ID},
	} {
		status, body = b.do(t, bob, call.method, call.path, `{}`)
		require.Equal(t, http.StatusForbidden, status, "%s %s", call.method, call.path)
		require.Equal(t, "authz_denied", errorCode(t, body))
	}
	status, body = b.do(t, bob, "GET", "/api/v1/plugins", "")
	require.Equal(t, http.StatusForbidden, status, "admin routes are for superusers")

	var list []api.Deployment
	_, body = b.do(t, bob, "GET", "/api/v1/deployments", "")
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list, 1)
	require.Equal(t, "bob", list[0].Namespace)
	_, body = b.do(t, root, "GET", "/api/v1/deployments", "")
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list, 2, "a superuser sees every deployment")
	status, _ = b.do(t, root, "GET", "/api/v1/deployments/"+d.ID, "")
	require.Equal(t, http.StatusOK, status)

	// Bob's refusal is in the audit trail, with who, what and why.
	bobUser := mustUser(t, b, "bob")
	events, err := b.st.AuditEvents(context.Background(), 0, 1000)
	require.NoError(t, err)
	var found bool
	for _, e := range events {
		if e.Actor == bobUser && e.Result == "denied" && e.DeploymentID == d.ID && e.Reason == "owner" && e.Action == "deployment.submit" {
			found = e.RequestID != "" && e.Issuer == "session"
		}
	}
	require.True(t, found, "bob's denied submit is audited with request id and issuer: %+v", events)
	report, err := b.trail.Verify(context.Background())
	require.NoError(t, err, "%+v", report)
}

func mustUser(t *testing.T, b *bundle, name string) string {
	users, err := b.accounts.Users(context.Background())
	require.NoError(t, err)
	for _, u := range users {
		if u.Name == name {
			return u.ID
		}
	}
	t.Fatalf("no user %s", name)
	return ""
}

func TestTokensNeedNoCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/tokens", `{"name":"script","lifetime_days":30}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var tok api.TokenAnswer
	require.NoError(t, json.Unmarshal(body, &tok))
	require.True(t, strings.HasPrefix(tok.Token, "fh_"))
	status, body = b.do(t, client{token: tok.Token}, "POST", "/api/v1/deployments", `{"namespace":"scripted"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	status, _ = b.do(t, client{token: "fh_not-a-token"}, "GET", "/api/v1/deployments", "")
	require.Equal(t, http.StatusUnauthorized, status)
}

func TestUnknownRouteIsNotFoundError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := b.user(t, "root", true)
	for _, path := range []string{"/api/v1/nothing-here", "/nothing-here"} {
		status, body := b.do(t, root, "GET", path, "")
		require.Equal(t, http.StatusNotFound, status, path)
		require.Equal(t, "not_found", errorCode(t, body))
	}
}

func TestDeploymentsListPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.user(t, "alice", false)
	for _, ns := range []string{"a1", "a2", "a3", "a4", "a5"} {
		status, _ := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"`+ns+`"}`)
		require.Equal(t, http.StatusCreated, status)
	}
	var seen []string
	before := ""
	for page := 0; page < 5; page++ {
		req := httptest.NewRequest("GET", "/api/v1/deployments?limit=2&before="+before, nil)
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: alice.cookie})
		resp, err := b.app.Test(req, -1)
		require.NoError(t, err)
		var list []api.Deployment
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
		resp.Body.Close()
		for _, d := range list {
			seen = append(seen, d.Namespace)
		}
		before = resp.Header.Get(api.NextPageHeader)
		if before == "" {
			break
		}
	}
	require.Equal(t, []string{"a5", "a4", "a3", "a2", "a1"}, seen, "newest first, each once")
	status, body := b.do(t, alice, "GET", "/api/v1/deployments?limit=9999", "")
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "invalid_configuration", errorCode(t, body))
}

func TestCreateRefusesABadOrTakenNamespace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"Not DNS safe"}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "invalid_configuration", errorCode(t, body))
	require.Contains(t, string(body), `"location":"/namespace"`)
	status, _ = b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusCreated, status)
	status, body = b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, "conflict", errorCode(t, body))
}

// Refused calls on a build are audited under the build's id as build_id and its
// deployment's as deployment_id, never the build id as a deployment's.
func TestRefusedBuildCallsAreAuditedUnderTheBuild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	alice, bob := b.user(t, "alice", false), b.user(t, "bob", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"alice"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	build, err := b.st.CreateBuild(ctx, d.ID)
	require.NoError(t, err)

	calls := []struct {
		who          client
		method, path string
		status       int
	}{
		{bob, "GET", "/api/v1/builds/" + build.ID, http.StatusForbidden},
		{bob, "GET", "/api/v1/builds/" + build.ID + "/events", http.StatusForbidden},
		{bob, "POST", "/api/v1/jobs/" + build.ID + "/cancel", http.StatusForbidden},
		{client{}, "GET", "/api/v1/builds/" + build.ID, http.StatusUnauthorized},
	}
	for _, call := range calls {
		status, _ := b.do(t, call.who, call.method, call.path, "")
		require.Equal(t, call.status, status, "%s %s", call.method, call.path)
	}
	status, _ = b.do(t, bob, "POST", "/api/v1/jobs/no-such-build/cancel", "")
	require.Equal(t, http.StatusForbidden, status)

	events, err := b.st.AuditEvents(ctx, 0, 1000)
	require.NoError(t, err)
	var refused []store.AuditEvent
	for _, e := range events {
		if e.Result == "denied" && (e.BuildID != "" || e.DeploymentID == build.ID) {
			refused = append(refused, e)
		}
	}
	require.Len(t, refused, len(calls)+1, "every refusal names the build: %+v", events)
	for _, e := range refused[:len(calls)] {
		require.Equal(t, build.ID, e.BuildID, "%s", e.Action)
		require.Equal(t, d.ID, e.DeploymentID, "%s: the build's deployment", e.Action)
	}
	last := refused[len(calls)]
	require.Equal(t, "no-such-build", last.BuildID)
	require.Empty(t, last.DeploymentID, "a build that does not exist has no deployment")
}

// A handler that panics answers 500 and the host goes on serving.
func TestPanicAnswersItsRequestOnly(t *testing.T) {
	t.Parallel()
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{})
	app.Get("/boom", func(*fiber.Ctx) error { panic("boom") })
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/boom", nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	resp, err = app.Test(httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// GET /api/v1/jobs pages through every build, newest first: X-Next-Before leads to the
// next page until a page is short.
func TestJobsArePaged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	root := b.user(t, "root", true)
	status, body := b.do(t, root, "POST", "/api/v1/deployments", `{"namespace":"paged"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	var want []string
	for range 7 {
		build, err := b.st.CreateBuild(ctx, d.ID)
		require.NoError(t, err)
		require.NoError(t, b.st.SetBuildState(ctx, build.ID, store.BuildSucceeded, ""))
		want = append([]string{build.ID}, want...)
	}
	var got []string
	var sizes []int
	for path := "/api/v1/jobs?limit=3"; path != ""; {
		require.Less(t, len(sizes), 4, "the pages do not end")
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: root.cookie})
		resp, err := b.app.Test(req, -1)
		require.NoError(t, err)
		var jobs []api.Job
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&jobs))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		sizes = append(sizes, len(jobs))
		for _, j := range jobs {
			got = append(got, j.ID)
		}
		path = ""
		if next := resp.Header.Get(api.NextPageHeader); next != "" {
			path = "/api/v1/jobs?limit=3&before=" + next
		}
	}
	require.Equal(t, []int{3, 3, 1}, sizes)
	require.Equal(t, want, got, "every build once, newest first")
	status, _ = b.do(t, root, "GET", "/api/v1/jobs?limit=0", "")
	require.Equal(t, http.StatusBadRequest, status)
}
