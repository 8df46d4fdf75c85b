package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-ldap/ldap/v3"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

func TestSignInRefusals(t *testing.T) {
	tenant := tenantName("refuse")
	d := newTestDirectory(t, tenant)
	t.Cleanup(func() { d.remove(t) })
	alicePassword, bobPassword := "alice-"+oauth2.GenerateVerifier(), "bob-"+oauth2.GenerateVerifier()
	d.addUser(t, "alice", alicePassword)
	d.addUser(t, "bob", bobPassword)
	d.addGroup(t, "app-users", "alice")

	f := newFrontDoor(t)
	pl := startPlugin(t, t.TempDir(), `{}`)
	reg := pl.provision(t, f, tenant, "app", d, []string{"app-users"}, nil)
	r := newRP(t, f, reg)

	t.Run("user_outside_the_allowed_groups", func(t *testing.T) {
		authURL, _, _, _ := r.authURL()
		id, csrf, page := loginForm(t, r.browser, authURL)
		require.Contains(t, page, "Sign in to App app")
		resp, body := postLogin(t, r.browser, reg.result.Issuer, id, csrf, "bob", bobPassword)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Empty(t, resp.Header.Get("Location"), "the refused user was redirected")
		require.Contains(t, body, "App app admits only members of <strong>app-users</strong>")
		require.Contains(t, body, "<strong>bob</strong>")
		// The sign-in is spent: the callback gives no code.
		resp, err := r.browser.Get(strings.TrimSuffix(reg.result.Issuer, "/") + "/authorize/callback?id=" + url.QueryEscape(id))
		require.NoError(t, err)
		resp.Body.Close()
		if loc, err := resp.Location(); err == nil {
			require.Empty(t, loc.Query().Get("code"), "the refused sign-in still gave a code")
		}
	})

	t.Run("refresh_refused_once_the_user_left_the_group", func(t *testing.T) {
		signed := r.signIn(t, "alice", alicePassword)
		_, err := r.cfg.TokenSource(r.ctx, &oauth2.Token{RefreshToken: signed.token.RefreshToken}).Token()
		require.NoError(t, err)
		signed = r.signIn(t, "alice", alicePassword)
		setMembers := func(name string) {
			c, err := testServer.Admin()
			require.NoError(t, err)
			defer c.Close()
			m := ldap.NewModifyRequest("cn=app-users,"+d.result.GroupsDN, nil)
			m.Replace("member", []string{"uid=" + name + "," + d.result.UsersDN})
			require.NoError(t, c.Modify(m))
		}
		setMembers("bob")
		defer setMembers("alice")
		_, err = r.cfg.TokenSource(r.ctx, &oauth2.Token{RefreshToken: signed.token.RefreshToken}).Token()
		require.ErrorContains(t, err, "invalid_grant", "a user taken out of the allowed groups got new tokens")
	})

	t.Run("wrong_password_and_unknown_user_read_the_same", func(t *testing.T) {
		authURL, _, _, _ := r.authURL()
		id, csrf, _ := loginForm(t, r.browser, authURL)
		resp, wrong := postLogin(t, r.browser, reg.result.Issuer, id, csrf, "alice", "not-the-password")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Contains(t, wrong, msgWrong)
		resp, unknown := postLogin(t, r.browser, reg.result.Issuer, id, csrf, "nobody", "not-the-password")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Equal(t, strings.Replace(wrong, `value="alice"`, `value="nobody"`, 1), unknown, "an unknown user reads differently from a wrong password")
		// The same sign-in still completes with the right password.
		resp, _ = postLogin(t, r.browser, reg.result.Issuer, id, csrf, "alice", alicePassword)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	})

	t.Run("form_without_its_cookie", func(t *testing.T) {
		authURL, _, _, _ := r.authURL()
		id, csrf, _ := loginForm(t, r.browser, authURL)
		other := f.browser() // another browser: no cookie of this sign-in
		resp, body := postLogin(t, other, reg.result.Issuer, id, csrf, "alice", alicePassword)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Contains(t, body, msgForm)
		resp, _ = postLogin(t, r.browser, reg.result.Issuer, id, "forged", "alice", alicePassword)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	})

	t.Run("unregistered_redirect_uri", func(t *testing.T) {
		u, _ := url.Parse(r.cfg.AuthCodeURL("state", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		q := u.Query()
		q.Set("redirect_uri", "https://evil.example/callback")
		u.RawQuery = q.Encode()
		resp, err := r.browser.Get(u.String())
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		loc, _ := resp.Location()
		require.False(t, loc != nil && (loc.Host == "evil.example" || loc.Path == loginPath), "an unregistered redirect URI was followed: %s", loc)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	})

	t.Run("rate_limit_per_user", func(t *testing.T) {
		authURL, _, _, _ := r.authURL()
		id, csrf, _ := loginForm(t, r.browser, authURL)
		// alice failed once already, in the case above.
		for i := range userFailureBurst - 1 {
			resp, _ := postLogin(t, r.browser, reg.result.Issuer, id, csrf, "alice", "wrong")
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "attempt %d", i)
		}
		resp, body := postLogin(t, r.browser, reg.result.Issuer, id, csrf, "alice", alicePassword)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the right password after %d failures", userFailureBurst)
		require.Contains(t, body, msgLimited)
		// Another user from the same address is not held up by alice's failures.
		d.addUser(t, "carol", alicePassword)
		d.addGroup(t, "carol-only", "carol")
		resp, _ = postLogin(t, r.browser, reg.result.Issuer, id, csrf, "carol", alicePassword)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "carol is refused for her groups, not for alice's failures")
	})

	t.Run("rate_limit_per_address", func(t *testing.T) {
		authURL, _, _, _ := r.authURL()
		id, csrf, _ := loginForm(t, r.browser, authURL)
		// This address failed in the cases above already; fresh user names each time, so
		// only the address's own limit can stop them.
		last := 0
		for i := 0; i < addrFailureBurst && last != http.StatusTooManyRequests; i++ {
			resp, _ := postLogin(t, r.browser, reg.result.Issuer, id, csrf, "user"+string(rune('a'+i)), "wrong")
			last = resp.StatusCode
		}
		require.Equal(t, http.StatusTooManyRequests, last, "%d failures from one address were not limited", addrFailureBurst)
		// The address comes from X-Forwarded-For when the peer is a trusted proxy.
		req, _ := http.NewRequest(http.MethodPost, "http://"+reg.result.Upstream+loginPath, strings.NewReader(url.Values{"id": {id}, "csrf": {csrf}, "username": {"carol"}, "password": {alicePassword}}.Encode()))
		req.Host = strings.TrimSuffix(strings.TrimPrefix(reg.result.Issuer, "https://"), "/")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		req.AddCookie(&http.Cookie{Name: csrfCookie(id), Value: csrf})
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		// Loopback is a trusted proxy by default, so this one is believed: 203.0.113.9 is
		// a fresh address, and carol is refused for her groups only.
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	})

	checkLogs(t, pl.logs.String(), alicePassword, bobPassword, string(reg.secrets["client-secret"]))
}

func TestTenantIsolation(t *testing.T) {
	ta, tb := tenantName("isoa"), tenantName("isob")
	da, db := newTestDirectory(t, ta), newTestDirectory(t, tb)
	t.Cleanup(func() { da.remove(t); db.remove(t) })
	pw := "alice-" + oauth2.GenerateVerifier()
	da.addUser(t, "alice", pw)
	f := newFrontDoor(t)
	pl := startPlugin(t, t.TempDir(), `{}`)
	ra := pl.provision(t, f, ta, "app", da, nil, nil)
	rb := pl.provision(t, f, tb, "app", db, nil, nil)
	a, b := newRP(t, f, ra), newRP(t, f, rb)
	signed := a.signIn(t, "alice", pw)

	// A's client at B's issuer: unknown there.
	cross := *a
	cross.cfg.Endpoint = b.provider.Endpoint()
	u := cross.cfg.AuthCodeURL("state", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	resp, err := a.browser.Get(u)
	require.NoError(t, err)
	resp.Body.Close()
	if loc, err := resp.Location(); err == nil {
		require.NotEqual(t, loginPath, loc.Path, "B's issuer started a sign-in for A's client")
	}
	require.NoError(t, clientAuthenticates(a.browser, ra.result.Issuer, ra.result.ClientID, cross.cfg.ClientSecret))
	require.Error(t, clientAuthenticates(a.browser, rb.result.Issuer, ra.result.ClientID, cross.cfg.ClientSecret), "B's issuer took A's client")
	_, err = cross.cfg.Exchange(a.ctx, signed.code)
	require.Error(t, err, "B's token endpoint took A's code")

	// A's user at B's log-in: not known there.
	authURL, _, _, _ := b.authURL()
	id, csrf, _ := loginForm(t, b.browser, authURL)
	resp, _ = postLogin(t, b.browser, rb.result.Issuer, id, csrf, "alice", pw)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "A's user signed in at B")

	// A's tokens at B: the ID token does not verify, the access token is not taken.
	_, err = b.provider.Verifier(&oidc.Config{ClientID: ra.result.ClientID}).Verify(b.ctx, signed.rawID)
	require.Error(t, err, "B's keys verify A's ID token")
	_, err = b.provider.UserInfo(b.ctx, oauth2.StaticTokenSource(signed.token))
	require.Error(t, err, "B's userinfo took A's access token")
	_, err = b.cfg.TokenSource(context.WithValue(b.ctx, oauth2.HTTPClient, b.browser), &oauth2.Token{RefreshToken: signed.token.RefreshToken}).Token()
	require.Error(t, err, "B's token endpoint took A's refresh token")
}
