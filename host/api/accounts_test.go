package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/store"
)

// raw sends a request as given, without the JSON content type do adds.
func (b *bundle) raw(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := b.app.Test(req, -1)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func bodyCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var answer struct {
		Error *api.Error `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.NotNil(t, answer.Error)
	return answer.Error.Code
}

// TestLoginRefusesFormsAndOtherSites: a page on another site can post a form, or a
// fetch without a preflight, to /api/v1/login; neither may sign the visitor in (issue
// 18, defect 2: a form-encoded body was taken and set the session cookie).
func TestLoginRefusesFormsAndOtherSites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, password, err := b.accounts.CreateUser(context.Background(), "mallory", false)
	require.NoError(t, err)
	jsonBody := `{"name":"mallory","password":"` + password + `"}`

	for _, contentType := range []string{"application/x-www-form-urlencoded", "application/xml", "text/plain", ""} {
		body := "name=mallory&password=" + password
		req := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp := b.raw(t, req)
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "Content-Type %q", contentType)
		require.Contains(t, resp.Header.Get("Content-Type"), "application/json")
		require.Equal(t, "unsupported_media_type", bodyCode(t, resp))
		require.Empty(t, resp.Cookies(), "no session cookie")
	}
	// text/plain with a JSON body is what a form with enctype=text/plain or a simple
	// fetch sends without a preflight.
	req := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(jsonBody))
	req.Header.Set("Content-Type", "text/plain")
	resp := b.raw(t, req)
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	require.Empty(t, resp.Cookies())

	for name, headers := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": "cross-site"},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site": "same-site"},
		"Origin of another site":    {"Origin": "https://evil.example"},
		"Origin null":               {"Origin": "null"},
	} {
		req := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(jsonBody))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp := b.raw(t, req)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, name)
		require.Equal(t, "cross_site", bodyCode(t, resp), name)
		require.Empty(t, resp.Cookies(), name)
	}

	for name, headers := range map[string]map[string]string{
		"a script":         {},
		"this host's page": {"Sec-Fetch-Site": "same-origin", "Origin": "http://example.com"},
		"an older browser": {"Origin": "http://example.com"},
	} {
		req := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(jsonBody))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp := b.raw(t, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, name)
		require.NotEmpty(t, resp.Cookies(), name)
	}
}

// TestBodiesMustBeJSON: every API call with a body takes JSON only.
func TestBodiesMustBeJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := b.user(t, "root", true)
	req := httptest.NewRequest("POST", "/api/v1/users", strings.NewReader("name=eve&superuser=true"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", root.csrf)
	req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: root.cookie})
	resp := b.raw(t, req)
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	require.Equal(t, "unsupported_media_type", bodyCode(t, resp))
	users, err := b.accounts.Users(context.Background())
	require.NoError(t, err)
	require.Len(t, users, 1, "no user made")
}

// TestLoginSlowedWithRetryAfter: an address that keeps failing is answered 429 with
// Retry-After (that another address still signs in is host/auth's
// TestFailuresElsewhereLockNobodyOut: app.Test has one client address).
func TestLoginSlowedWithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, password, err := b.accounts.CreateUser(context.Background(), "nina", false)
	require.NoError(t, err)
	login := func(pw string) *http.Response {
		req := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(`{"name":"nina","password":"`+pw+`"}`))
		req.Header.Set("Content-Type", "application/json")
		return b.raw(t, req)
	}
	for range 10 {
		login("guess")
	}
	resp := login(password)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After in seconds")
	require.GreaterOrEqual(t, wait, 1)
	require.Equal(t, "rate_limited", bodyCode(t, resp))
}

// TestFirstStartPasswordMustBeChanged: a session signed in with the first start's
// password may do nothing but change it; a token the provider made on the command line
// works all along (issue 10, item 11).
func TestFirstStartPasswordMustBeChanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, err := b.accounts.EnsureAdmin(ctx)
	require.NoError(t, err)
	admin := mustUser(t, b, "admin")
	cliToken, _, err := b.accounts.NewToken(ctx, admin, "cli", time.Hour)
	require.NoError(t, err)

	s := b.sessionOf(t, first)
	status, body := b.do(t, s, "GET", "/api/v1/me", "")
	require.Equal(t, http.StatusOK, status)
	var me api.Me
	require.NoError(t, json.Unmarshal(body, &me))
	require.True(t, me.MustChangePassword)

	for _, call := range [][3]string{
		{"GET", "/api/v1/deployments", ""},
		{"POST", "/api/v1/tokens", `{"name":"x","lifetime_days":1}`},
		{"POST", "/api/v1/users", `{"name":"eve"}`},
	} {
		status, body := b.do(t, s, call[0], call[1], call[2])
		require.Equal(t, http.StatusForbidden, status, "%s %s", call[0], call[1])
		require.Equal(t, "password_change_required", errorCode(t, body))
	}
	status, _ = b.do(t, client{token: cliToken}, "GET", "/api/v1/deployments", "")
	require.Equal(t, http.StatusOK, status, "the provider's token works before the change")

	status, body = b.do(t, s, "PUT", "/api/v1/me/password", `{"current_password":"nope","new_password":"correct horse battery"}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "/current_password")
	status, body = b.do(t, s, "PUT", "/api/v1/me/password", `{"current_password":"`+first+`","new_password":"short"}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "/new_password")
	status, body = b.do(t, s, "PUT", "/api/v1/me/password", `{"current_password":"`+first+`","new_password":"correct horse battery"}`)
	require.Equal(t, http.StatusNoContent, status, "%s", body)

	status, _ = b.do(t, s, "GET", "/api/v1/deployments", "")
	require.Equal(t, http.StatusOK, status, "the same session goes on after the change")
	status, _ = b.do(t, client{token: cliToken}, "GET", "/api/v1/deployments", "")
	require.Equal(t, http.StatusOK, status, "and so does the provider's token")
}

// sessionOf signs admin in with password and returns the session.
func (b *bundle) sessionOf(t *testing.T, password string) client {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(`{"name":"admin","password":"`+password+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp := b.raw(t, req)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var login struct {
		CSRF string `json:"csrf_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&login))
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie {
			return client{cookie: c.Value, csrf: login.CSRF}
		}
	}
	t.Fatal("no session cookie")
	return client{}
}

// TestTakingAccessAway: tokens are listed without their values and revoked by their
// owner or a superuser; a superuser disables, demotes, resets and deletes accounts,
// but not the last superuser, not its own, and not one that owns deployments (issue 18,
// defect 4).
func TestTakingAccessAway(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	root, alice, bob := b.user(t, "root", true), b.user(t, "alice", false), b.user(t, "bob", false)
	aliceID := mustUser(t, b, "alice")
	aliceToken, tok, err := b.accounts.NewToken(ctx, aliceID, "backup script", time.Hour)
	require.NoError(t, err)

	status, body := b.do(t, client{token: aliceToken}, "GET", "/api/v1/tokens", "")
	require.Equal(t, http.StatusOK, status)
	var tokens []api.Token
	require.NoError(t, json.Unmarshal(body, &tokens))
	require.Len(t, tokens, 1)
	require.Equal(t, "backup script", tokens[0].Name)
	require.NotNil(t, tokens[0].LastUsedAt, "this very call used it")
	require.NotContains(t, string(body), aliceToken)
	require.NotContains(t, string(body), strings.TrimPrefix(aliceToken, "fh_"))

	status, body = b.do(t, bob, "DELETE", "/api/v1/tokens/"+tok.ID, "")
	require.Equal(t, http.StatusForbidden, status, "another operator's token")
	require.Equal(t, "authz_denied", errorCode(t, body))
	status, _ = b.do(t, bob, "GET", "/api/v1/users/alice/tokens", "")
	require.Equal(t, http.StatusForbidden, status)
	status, body = b.do(t, root, "GET", "/api/v1/users/alice/tokens", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), tok.ID)
	status, _ = b.do(t, alice, "DELETE", "/api/v1/tokens/"+tok.ID, "")
	require.Equal(t, http.StatusNoContent, status, "its owner revokes it")
	status, _ = b.do(t, client{token: aliceToken}, "GET", "/api/v1/me", "")
	require.Equal(t, http.StatusUnauthorized, status, "a revoked token is refused at once")

	// Disabling ends the sessions and tokens.
	aliceToken, _, err = b.accounts.NewToken(ctx, aliceID, "ci", time.Hour)
	require.NoError(t, err)
	status, _ = b.do(t, bob, "POST", "/api/v1/users/alice/disable", "")
	require.Equal(t, http.StatusForbidden, status, "an operator may not")
	status, body = b.do(t, root, "POST", "/api/v1/users/alice/disable", "")
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	status, _ = b.do(t, alice, "GET", "/api/v1/me", "")
	require.Equal(t, http.StatusUnauthorized, status, "the session ended")
	status, _ = b.do(t, client{token: aliceToken}, "GET", "/api/v1/me", "")
	require.Equal(t, http.StatusUnauthorized, status, "the token ended")
	status, _ = b.do(t, root, "POST", "/api/v1/users/alice/enable", "")
	require.Equal(t, http.StatusNoContent, status)

	// A superuser may not lock itself out, nor remove the last superuser.
	for _, call := range [][2]string{{"POST", "/disable"}, {"POST", "/demote"}, {"DELETE", ""}, {"POST", "/reset-password"}} {
		status, body := b.do(t, root, call[0], "/api/v1/users/root"+call[1], "")
		require.Equal(t, http.StatusConflict, status, "%s root%s", call[0], call[1])
		require.Contains(t, string(body), "own account")
	}
	status, _ = b.do(t, root, "POST", "/api/v1/users/alice/promote", "")
	require.Equal(t, http.StatusNoContent, status)
	status, _ = b.do(t, root, "POST", "/api/v1/users/root/disable", "")
	require.Equal(t, http.StatusConflict, status, "still its own account with another superuser")
	status, _ = b.do(t, root, "POST", "/api/v1/users/alice/demote", "")
	require.Equal(t, http.StatusNoContent, status)

	// Deleting an owner of deployments is refused, naming how many.
	bobID := mustUser(t, b, "bob")
	_, err = b.st.CreateDeployment(ctx, store.Deployment{Namespace: "bobs", Owner: bobID, State: "active", Config: "{}", SecretRefs: "{}"})
	require.NoError(t, err)
	status, body = b.do(t, root, "DELETE", "/api/v1/users/bob", "")
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, string(body), "owns 1 deployments")
	status, _ = b.do(t, root, "DELETE", "/api/v1/users/alice", "")
	require.Equal(t, http.StatusNoContent, status)
	status, _ = b.do(t, root, "DELETE", "/api/v1/users/alice", "")
	require.Equal(t, http.StatusNotFound, status)

	// A reset shows the new password once and marks it to be changed.
	status, body = b.do(t, root, "POST", "/api/v1/users/bob/reset-password", "")
	require.Equal(t, http.StatusOK, status)
	var reset api.PasswordAnswer
	require.NoError(t, json.Unmarshal(body, &reset))
	require.NotEmpty(t, reset.Password)
	status, _ = b.do(t, bob, "GET", "/api/v1/me", "")
	require.Equal(t, http.StatusUnauthorized, status, "the reset ended bob's session")

	events, err := b.st.AuditEvents(ctx, 0, 1000)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, e := range events {
		seen[e.Action+" "+string(e.Result)] = true
		require.NotContains(t, e.Reason, reset.Password)
	}
	for _, want := range []string{"token.revoke ok", "user.disable ok", "user.enable ok", "user.demote ok", "user.delete ok", "user.delete invalid", "user.reset_password ok", "user.disable invalid"} {
		require.True(t, seen[want], "audited: %s", want)
	}
}
