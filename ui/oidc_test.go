package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/oidctest"
	"github.com/fedhost/fedhost/ui"
)

const oidcButton = "Log in with Example ID"

// as makes the provider's next log-in that of username.
func as(p *oidctest.Provider, username string) {
	p.As(map[string]any{"sub": "s-" + username, "preferred_username": username})
}

// oidcBundle is a UI with single sign-on through a test provider.
type oidcBundle struct {
	*bundle
	p *oidctest.Provider
}

func setupOIDC(t *testing.T) oidcBundle {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	log := audit.New(st, audit.Options{})
	svc := auth.New(st, auth.Options{Audit: log, Params: fastHash})
	p := oidctest.New(t, time.Now)
	o, err := auth.NewOIDC(ctx, svc, auth.OIDCConfig{
		Issuer: p.URL(), ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret,
		RedirectURL: "http://fedhost.test/login/oidc/callback",
	})
	require.NoError(t, err)
	engine := deploy.New(deploy.Options{Store: st})
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	ui.New(ui.Deps{Engine: engine, Store: st, Auth: svc, Audit: log, Version: "test", OIDC: o, OIDCButton: oidcButton}).Mount(app)
	alice, _, err := svc.CreateUser(ctx, "alice", false)
	require.NoError(t, err)
	b := &bundle{app: app, st: st, auth: svc, engine: engine, users: map[string]auth.User{"alice": alice}, pass: map[string]string{}}
	return oidcBundle{bundle: b, p: p}
}

func cookieOf(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// begin follows the log-in page's button to the provider and back, as a browser
// would, and returns the callback request with the cookie /login/oidc set.
func (b oidcBundle) begin(t *testing.T, next string) *http.Request {
	t.Helper()
	res, _ := b.do(t, httptest.NewRequest(http.MethodGet, "/login/oidc?next="+url.QueryEscape(next), nil))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	toProvider := res.Header.Get("Location")
	require.True(t, strings.HasPrefix(toProvider, b.p.URL()+"/authorize?"), toProvider)
	flow := cookieOf(res, "fedhost_oidc")
	require.NotNil(t, flow)
	require.True(t, flow.HttpOnly)
	require.Equal(t, "/login/oidc", flow.Path)
	require.Equal(t, 600, flow.MaxAge)
	require.Equal(t, http.SameSiteLaxMode, flow.SameSite)

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(toProvider)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	back, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/login/oidc/callback", back.Path)
	req := httptest.NewRequest(http.MethodGet, back.RequestURI(), nil)
	req.AddCookie(&http.Cookie{Name: flow.Name, Value: flow.Value})
	return req
}

func TestOIDCButton(t *testing.T) {
	t.Parallel()
	t.Run("configured", func(t *testing.T) {
		t.Parallel()
		b := setupOIDC(t)
		res, page := b.do(t, httptest.NewRequest(http.MethodGet, "/login?next=/deployments/x", nil))
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Contains(t, page, `<a class="button" href="/login/oidc?next=%2fdeployments%2fx">`+oidcButton+`</a>`)
		requireLabelled(t, page)
	})
	t.Run("not configured", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, page := b.do(t, httptest.NewRequest(http.MethodGet, "/login", nil))
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.NotContains(t, page, "/login/oidc")
		res, _ = b.do(t, httptest.NewRequest(http.MethodGet, "/login/oidc", nil))
		require.Equal(t, http.StatusNotFound, res.StatusCode)
	})
}

func TestOIDCLogin(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t)
	as(b.p, "alice")

	res, _ := b.do(t, b.begin(t, "/account"))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/account", res.Header.Get("Location"))
	session := cookieOf(res, ui.CookieName)
	require.NotNil(t, session)
	require.True(t, session.HttpOnly)
	require.Equal(t, "/", session.Path)
	flow := cookieOf(res, "fedhost_oidc")
	require.NotNil(t, flow)
	require.Equal(t, -1, flow.MaxAge, "the flow cookie is used once")

	c := &client{b: b.bundle, cookie: session.Value}
	res, page := c.get(t, "/deployments")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Signed in as <strong>alice</strong>")
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "user.login", Result: "ok", Actor: b.users["alice"].ID, Issuer: "oidc"}))
}

func TestOIDCLoginDefaultsToDeployments(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t)
	as(b.p, "alice")
	res, _ := b.do(t, b.begin(t, "https://elsewhere.example/"))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/deployments", res.Header.Get("Location"))
	require.NotNil(t, cookieOf(res, ui.CookieName))
}

func TestOIDCLoginRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		username string
		edit     func(req *http.Request) *http.Request
		want     string
	}{
		{
			name:     "unknown user",
			username: "mallory",
			want:     `Single sign-on refused: there is no fedhost account named &#34;mallory&#34;: ask a superuser to create it, then log in again.`,
		},
		{
			name:     "another browser",
			username: "alice",
			edit: func(req *http.Request) *http.Request {
				return httptest.NewRequest(http.MethodGet, req.URL.RequestURI(), nil) // without the flow cookie
			},
			want: "Single sign-on refused: the log-in was not begun in this browser, or took more than 10 minutes: log in again.",
		},
		{
			name:     "refused by the provider",
			username: "alice",
			edit: func(req *http.Request) *http.Request {
				r := httptest.NewRequest(http.MethodGet, "/login/oidc/callback?error=access_denied&error_description=%3Cb%3Enope%3C%2Fb%3E", nil)
				for _, c := range req.Cookies() {
					r.AddCookie(c)
				}
				return r
			},
			want: "Single sign-on refused: the OpenID provider refused the log-in (access_denied): try again, or ask your hosting provider.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOIDC(t)
			as(b.p, tt.username)
			req := b.begin(t, "/deployments")
			if tt.edit != nil {
				req = tt.edit(req)
			}
			res, page := b.do(t, req)
			require.Equal(t, http.StatusForbidden, res.StatusCode)
			require.Nil(t, cookieOf(res, ui.CookieName))
			require.Contains(t, page, `<div class="alert" role="alert">`+tt.want+`</div>`)
			require.Contains(t, page, oidcButton, "the log-in page, to try again")
			require.NotContains(t, page, "nope")
		})
	}
}
