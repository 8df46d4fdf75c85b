package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-ldap/ldap/v3"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/fedhost/fedhost/sdk/resource"
)

// tenantName is a deployment name of its own for each test, so the shared slapd holds
// no two tests' subtrees under one name.
func tenantName(base string) string {
	return fmt.Sprintf("%s%04d", base, time.Now().UnixNano()%10000)
}

// rp is a relying party on github.com/coreos/go-oidc and golang.org/x/oauth2: a client
// library independent of the provider's.
type rp struct {
	ctx      context.Context
	provider *oidc.Provider
	cfg      oauth2.Config
	browser  *http.Client
	reg      registered
}

func newRP(t testing.TB, f *frontDoor, reg registered) *rp {
	t.Helper()
	b := f.browser()
	ctx := oidc.ClientContext(context.Background(), b)
	ctx = context.WithValue(ctx, oauth2.HTTPClient, b)
	provider, err := oidc.NewProvider(ctx, reg.result.Issuer)
	require.NoError(t, err, "discovery at %s", reg.result.Issuer)
	return &rp{ctx: ctx, provider: provider, browser: b, reg: reg, cfg: oauth2.Config{
		ClientID: reg.result.ClientID, ClientSecret: string(reg.secrets[reg.result.ClientSecret.Secret]),
		Endpoint: provider.Endpoint(), RedirectURL: reg.redirect,
		Scopes: []string{oidc.ScopeOpenID, "profile", "email", "groups", oidc.ScopeOfflineAccess},
	}}
}

// signedIn is what a completed sign-in gave the relying party.
type signedIn struct {
	token   *oauth2.Token
	rawID   string
	idToken *oidc.IDToken
	code    string
}

// authURL starts a sign-in: the authorization URL with PKCE (S256), state and nonce.
func (r *rp) authURL() (u, state, nonce, verifier string) {
	state, nonce, verifier = oauth2.GenerateVerifier(), oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	return r.cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), state, nonce, verifier
}

// signIn runs the whole code flow as name and checks the ID token.
func (r *rp) signIn(t testing.TB, name, password string) signedIn {
	t.Helper()
	authURL, state, nonce, verifier := r.authURL()
	id, csrf, _ := loginForm(t, r.browser, authURL)
	resp, body := postLogin(t, r.browser, r.reg.result.Issuer, id, csrf, name, password)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "log-in: %s", body)
	loc, err := resp.Location()
	require.NoError(t, err)
	resp, err = r.browser.Get(loc.String())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "callback")
	back, err := resp.Location()
	require.NoError(t, err)
	require.Equal(t, r.reg.redirect, back.Scheme+"://"+back.Host+back.Path, "the provider redirected elsewhere")
	require.Equal(t, state, back.Query().Get("state"))
	code := back.Query().Get("code")
	require.NotEmpty(t, code)
	tok, err := r.cfg.Exchange(r.ctx, code, oauth2.VerifierOption(verifier))
	require.NoError(t, err, "code exchange")
	raw, _ := tok.Extra("id_token").(string)
	require.NotEmpty(t, raw, "no ID token")
	idt, err := r.provider.Verifier(&oidc.Config{ClientID: r.cfg.ClientID}).Verify(r.ctx, raw)
	require.NoError(t, err, "ID token")
	require.Equal(t, nonce, idt.Nonce)
	return signedIn{token: tok, rawID: raw, idToken: idt, code: code}
}

type claims struct {
	Email             string   `json:"email"`
	PreferredUsername string   `json:"preferred_username"`
	Name              string   `json:"name"`
	Groups            []string `json:"groups"`
}

// kid is the key id in a JWT's header.
func kid(t testing.TB, jwt string) string {
	t.Helper()
	header, err := base64.RawURLEncoding.DecodeString(strings.SplitN(jwt, ".", 2)[0])
	require.NoError(t, err)
	var h struct {
		Kid string `json:"kid"`
	}
	require.NoError(t, json.Unmarshal(header, &h))
	return h.Kid
}

func TestCodeFlowWithAnIndependentClient(t *testing.T) {
	tenant := tenantName("flow")
	d := newTestDirectory(t, tenant)
	t.Cleanup(func() { d.remove(t) })
	alicePassword := "alice-" + oauth2.GenerateVerifier()
	d.addUser(t, "alice", alicePassword)
	d.addGroup(t, "app-users", "alice")
	d.addGroup(t, "editors", "alice")

	f := newFrontDoor(t)
	dataDir := t.TempDir()
	const rotation = 4 * time.Second
	pl := startPlugin(t, dataDir, `{"key_rotation":"4s"}`)
	reg := pl.provision(t, f, tenant, "app", d, []string{"app-users"}, nil)
	r := newRP(t, f, reg)

	first := r.signIn(t, "alice", alicePassword)
	var c claims
	require.NoError(t, first.idToken.Claims(&c))
	require.Equal(t, "alice@example.org", c.Email)
	require.Equal(t, "alice", c.PreferredUsername)
	require.ElementsMatch(t, []string{"app-users", "editors"}, c.Groups)
	require.Equal(t, reg.result.Issuer, first.idToken.Issuer)
	require.Equal(t, []string{reg.result.ClientID}, first.idToken.Audience)

	t.Run("userinfo", func(t *testing.T) {
		info, err := r.provider.UserInfo(r.ctx, oauth2.StaticTokenSource(first.token))
		require.NoError(t, err)
		require.Equal(t, first.idToken.Subject, info.Subject)
		require.Equal(t, "alice@example.org", info.Email)
		var ic claims
		require.NoError(t, info.Claims(&ic))
		require.ElementsMatch(t, []string{"app-users", "editors"}, ic.Groups)
	})

	t.Run("code_is_single_use_and_needs_the_verifier", func(t *testing.T) {
		_, err := r.cfg.Exchange(r.ctx, first.code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
		require.Error(t, err, "a spent code gave tokens")
		authURL, _, _, _ := r.authURL()
		id, csrf, _ := loginForm(t, r.browser, authURL)
		resp, _ := postLogin(t, r.browser, reg.result.Issuer, id, csrf, "alice", alicePassword)
		loc, _ := resp.Location()
		resp, err = r.browser.Get(loc.String())
		require.NoError(t, err)
		resp.Body.Close()
		back, _ := resp.Location()
		_, err = r.cfg.Exchange(r.ctx, back.Query().Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier()))
		require.Error(t, err, "a wrong PKCE verifier gave tokens")
	})

	var rotated string
	t.Run("refresh_rotates_the_refresh_token", func(t *testing.T) {
		require.NotEmpty(t, first.token.RefreshToken)
		next, err := r.cfg.TokenSource(r.ctx, &oauth2.Token{RefreshToken: first.token.RefreshToken}).Token()
		require.NoError(t, err)
		require.NotEmpty(t, next.AccessToken)
		require.NotEqual(t, first.token.RefreshToken, next.RefreshToken)
		raw, _ := next.Extra("id_token").(string)
		idt, err := r.provider.Verifier(&oidc.Config{ClientID: r.cfg.ClientID}).Verify(r.ctx, raw)
		require.NoError(t, err)
		require.Equal(t, first.idToken.Subject, idt.Subject)
		_, err = r.cfg.TokenSource(r.ctx, &oauth2.Token{RefreshToken: first.token.RefreshToken}).Token()
		require.Error(t, err, "a spent refresh token gave tokens again")
		rotated = next.RefreshToken
	})

	t.Run("rotated_key_still_verifies_old_tokens", func(t *testing.T) {
		time.Sleep(time.Until(first.idToken.IssuedAt.Add(rotation + time.Second)))
		second := r.signIn(t, "alice", alicePassword)
		require.NotEqual(t, kid(t, first.rawID), kid(t, second.rawID), "the key was not rotated")
		// A relying party that fetches the key set now still verifies the first token.
		fresh := newRP(t, f, reg)
		_, err := fresh.provider.Verifier(&oidc.Config{ClientID: r.cfg.ClientID}).Verify(fresh.ctx, first.rawID)
		require.NoError(t, err, "the retired key is not published")
		_, err = fresh.provider.Verifier(&oidc.Config{ClientID: r.cfg.ClientID}).Verify(fresh.ctx, second.rawID)
		require.NoError(t, err)
	})

	t.Run("clients_and_keys_survive_a_restart", func(t *testing.T) {
		upstream := reg.result.Upstream
		pl.p.Kill()
		again := startPlugin(t, dataDir, `{"key_rotation":"4s"}`)
		t.Cleanup(func() { checkLogs(t, again.logs.String(), alicePassword, string(reg.secrets["client-secret"])) })
		st, err := again.rc.Status(context.Background(), resourceRequest(reg))
		require.NoError(t, err)
		require.Equal(t, "ready", st.State, st.Message)
		var res struct{ Upstream string }
		require.NoError(t, json.Unmarshal(st.Data, &res))
		require.Equal(t, upstream, res.Upstream, "the listener moved")
		fresh := newRP(t, f, reg)
		_, err = fresh.provider.Verifier(&oidc.Config{ClientID: r.cfg.ClientID}).Verify(fresh.ctx, first.rawID)
		require.NoError(t, err, "the keys did not survive")
		fresh.signIn(t, "alice", alicePassword)
	})

	checkLogs(t, pl.logs.String(), alicePassword, string(reg.secrets["client-secret"]), first.code, first.rawID,
		first.token.AccessToken, first.token.RefreshToken, rotated)
}

func resourceRequest(reg registered) resource.Request {
	return resource.Request{Tenant: reg.tenant, Instance: reg.instance, Type: "oidc"}
}

// checkLogs fails when any secret value appears in a plugin's log.
func checkLogs(t testing.TB, logs string, secrets ...string) {
	t.Helper()
	require.NotEmpty(t, logs, "the plugin logged nothing: the check would prove nothing")
	for i, s := range secrets {
		if s == "" {
			continue
		}
		if strings.Contains(logs, s) || strings.Contains(logs, url.QueryEscape(s)) {
			t.Errorf("secret %d appears in the plugin's log", i)
		}
	}
}

// TestSecretsTakenBackFromTheHost loses the data dir: the client secret and the keys the
// host kept in the secret resource and hands back make the deployment whole again.
func TestSecretsTakenBackFromTheHost(t *testing.T) {
	tenant := tenantName("back")
	d := newTestDirectory(t, tenant)
	t.Cleanup(func() { d.remove(t) })
	pw := "alice-" + oauth2.GenerateVerifier()
	d.addUser(t, "alice", pw)
	f := newFrontDoor(t)
	first := startPlugin(t, t.TempDir(), `{}`)
	reg := first.provision(t, f, tenant, "app", d, nil, nil)
	before := newRP(t, f, reg).signIn(t, "alice", pw)
	first.p.Kill()

	second := startPlugin(t, t.TempDir(), `{}`)
	again := second.provision(t, f, tenant, "app", d, nil, reg.secrets)
	require.Equal(t, string(reg.secrets[clientSecretKey]), string(again.secrets[clientSecretKey]), "the client secret handed back was not kept")
	require.JSONEq(t, string(reg.secrets[signingKeysKey]), string(again.secrets[signingKeysKey]), "the keys handed back were not kept")
	r := newRP(t, f, again)
	_, err := r.provider.Verifier(&oidc.Config{ClientID: r.cfg.ClientID}).Verify(r.ctx, before.rawID)
	require.NoError(t, err, "a token of before does not verify")
	after := r.signIn(t, "alice", pw)
	require.Equal(t, kid(t, before.rawID), kid(t, after.rawID), "another key signs")
	checkLogs(t, second.logs.String(), pw, string(reg.secrets[clientSecretKey]), after.rawID, after.token.AccessToken, after.token.RefreshToken)
}

// TestSingleSignOn signs in to one app with the password and to a second app of the
// deployment with the session at the issuer, and checks what ends the session's use.
func TestSingleSignOn(t *testing.T) {
	tenant := tenantName("sso")
	d := newTestDirectory(t, tenant)
	t.Cleanup(func() { d.remove(t) })
	pw := "alice-" + oauth2.GenerateVerifier()
	d.addUser(t, "alice", pw)
	d.addGroup(t, "one-users", "alice")
	f := newFrontDoor(t)
	pl := startPlugin(t, t.TempDir(), `{}`)
	one := newRP(t, f, pl.provision(t, f, tenant, "one", d, []string{"one-users"}, nil))
	two := newRP(t, f, pl.provision(t, f, tenant, "two", d, nil, nil))
	three := newRP(t, f, pl.provision(t, f, tenant, "three", d, []string{"three-users"}, nil))
	first := one.signIn(t, "alice", pw)

	// The same browser at app two: no form, straight back with a code.
	two.browser = one.browser
	start := func(r *rp, extra ...oauth2.AuthCodeOption) (*http.Response, string, string) {
		t.Helper()
		state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
		resp, err := r.browser.Get(r.cfg.AuthCodeURL(state, append(extra, oauth2.S256ChallengeOption(verifier))...))
		require.NoError(t, err)
		resp.Body.Close()
		loc, err := resp.Location()
		require.NoError(t, err)
		resp, err = r.browser.Get(loc.String())
		require.NoError(t, err)
		resp.Body.Close()
		return resp, state, verifier
	}
	resp, state, verifier := start(two)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the session did not sign alice in at app two")
	loc, _ := resp.Location()
	resp, err := two.browser.Get(loc.String())
	require.NoError(t, err)
	resp.Body.Close()
	back, _ := resp.Location()
	require.Equal(t, state, back.Query().Get("state"))
	tok, err := two.cfg.Exchange(two.ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	idt, err := two.provider.Verifier(&oidc.Config{ClientID: two.cfg.ClientID}).Verify(two.ctx, tok.Extra("id_token").(string))
	require.NoError(t, err)
	require.Equal(t, first.idToken.Subject, idt.Subject)

	// prompt=login asks for the password even with a session.
	resp, _, _ = start(two, oauth2.SetAuthURLParam("prompt", "login"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "prompt=login was answered from the session")

	// A session does not get a user into an app whose groups they are not in.
	three.browser = one.browser
	resp, _, _ = start(three)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Location"))

	// Signing out at the issuer ends the session.
	resp, err = one.browser.Get(strings.TrimSuffix(one.reg.result.Issuer, "/") + endSessionPath + "?id_token_hint=" + url.QueryEscape(first.rawID))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	loc, _ = resp.Location()
	require.Equal(t, signedOutPath, loc.Path)
	resp, _, _ = start(two)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the session outlived the sign-out")

	// A user removed from the directory is not signed in from their session.
	one.signIn(t, "alice", pw)
	c, err := testServer.Admin()
	require.NoError(t, err)
	require.NoError(t, c.Del(ldap.NewDelRequest("uid=alice,"+d.result.UsersDN, nil)))
	c.Close()
	resp, _, _ = start(two)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a removed user was signed in from the session")

	checkLogs(t, pl.logs.String(), pw, tok.AccessToken, tok.RefreshToken, first.rawID)
}
