package auth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/oidctest"
)

const (
	testClientID     = oidctest.ClientID
	testClientSecret = oidctest.ClientSecret
	testRedirectURL  = "http://fedhost.test/login/oidc/callback"
)

// oidcBundle is a Service on SQLite with an OIDC on a test provider.
type oidcBundle struct {
	bundle
	p    *oidctest.Provider
	oidc *auth.OIDC
}

func setupOIDC(t *testing.T, edit func(*auth.OIDCConfig)) oidcBundle {
	t.Helper()
	// The provider works the same whatever the store, so SQLite alone is enough.
	b := setup(t, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	p := oidctest.New(t, b.clock.Now)
	cfg := auth.OIDCConfig{Issuer: p.URL(), ClientID: testClientID, ClientSecret: testClientSecret, RedirectURL: testRedirectURL}
	if edit != nil {
		edit(&cfg)
	}
	return oidcBundle{bundle: b, p: p}.withOIDC(t, cfg)
}

func (b oidcBundle) withOIDC(t *testing.T, cfg auth.OIDCConfig) oidcBundle {
	t.Helper()
	o, err := auth.NewOIDC(context.Background(), b.svc, cfg)
	require.NoError(t, err)
	b.oidc = o
	return b
}

// login runs the browser's part: AuthURL, the provider's redirect, then Finish with
// the state of this log-in unless edit changes what the browser sends back.
func (b oidcBundle) login(t *testing.T, edit func(code, state *string)) (auth.User, error) {
	t.Helper()
	authURL, state, nonce, verifier := b.oidc.AuthURL()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(authURL)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	back, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/login/oidc/callback", back.Path)
	code, gotState := back.Query().Get("code"), back.Query().Get("state")
	if edit != nil {
		edit(&code, &gotState)
	}
	return b.oidc.Finish(context.Background(), code, state, nonce, verifier, gotState)
}

type event struct{ Actor, Issuer, Action, Subject, Result, Reason string }

func (b oidcBundle) events(t *testing.T) []event {
	t.Helper()
	require.NoError(t, b.log.Flush(context.Background()))
	rows, err := b.raw.Query(`SELECT actor, issuer, action, subject, result, reason FROM audit_events ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		require.NoError(t, rows.Scan(&e.Actor, &e.Issuer, &e.Action, &e.Subject, &e.Result, &e.Reason))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func (b oidcBundle) lastEvent(t *testing.T) event {
	t.Helper()
	events := b.events(t)
	require.NotEmpty(t, events)
	return events[len(events)-1]
}

func TestOIDCKnownUser(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, nil)
	ctx := context.Background()
	alice, _, err := b.svc.CreateUser(ctx, "alice", false)
	require.NoError(t, err)

	// Names are lowercase in fedhost: the provider's "Alice" is the account alice.
	b.p.As(map[string]any{"sub": "u-1", "preferred_username": "Alice"})
	got, err := b.login(t, nil)
	require.NoError(t, err)
	require.Equal(t, alice.ID, got.ID)
	require.False(t, got.Superuser)
	require.Equal(t, event{Actor: alice.ID, Issuer: "oidc", Action: "user.login", Subject: alice.ID, Result: "ok"}, b.lastEvent(t))

	// The session begins as after a password log-in.
	ns, err := b.svc.NewSession(ctx, got.ID)
	require.NoError(t, err)
	sess, err := b.svc.Session(ctx, ns.ID)
	require.NoError(t, err)
	require.Equal(t, "alice", sess.User.Name)

	// Neither a code nor a token reaches the audit trail.
	dump, err := json.Marshal(b.events(t))
	require.NoError(t, err)
	require.NotEmpty(t, b.p.Issued())
	for _, secret := range append(b.p.Issued(), testClientSecret) {
		require.NotContains(t, string(dump), secret)
	}
}

func TestOIDCUsernameClaim(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, func(c *auth.OIDCConfig) { c.UsernameClaim = "email" })
	carol, _, err := b.svc.CreateUser(context.Background(), "carol@example.org", false)
	require.NoError(t, err)

	b.p.As(map[string]any{"sub": "u-3", "preferred_username": "alice", "email": "carol@example.org"})
	got, err := b.login(t, nil)
	require.NoError(t, err)
	require.Equal(t, carol.ID, got.ID)

	b.p.As(map[string]any{"sub": "u-4", "preferred_username": "dave"})
	_, err = b.login(t, nil)
	require.ErrorIs(t, err, auth.ErrOIDCRefused)
	require.ErrorContains(t, err, `the ID token has no "email" claim`)
	require.Equal(t, event{Issuer: "oidc", Action: "user.login", Result: "denied", Reason: "username claim"}, b.lastEvent(t))
}

func TestOIDCUnknownUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		b := setupOIDC(t, nil)
		b.p.As(map[string]any{"sub": "u-2", "preferred_username": "mallory"})
		_, err := b.login(t, nil)
		require.ErrorIs(t, err, auth.ErrOIDCRefused)
		require.EqualError(t, err, `single sign-on refused: there is no fedhost account named "mallory": ask a superuser to create it, then log in again`)
		require.Equal(t, event{Issuer: "oidc", Action: "user.login", Result: "denied", Reason: "unknown user"}, b.lastEvent(t))
		users, err := b.svc.Users(ctx)
		require.NoError(t, err)
		require.Empty(t, users)
	})

	t.Run("created with create_users", func(t *testing.T) {
		t.Parallel()
		b := setupOIDC(t, func(c *auth.OIDCConfig) { c.CreateUsers = true })
		b.p.As(map[string]any{"sub": "u-2", "preferred_username": "newbie"})
		got, err := b.login(t, nil)
		require.NoError(t, err)
		require.Equal(t, "newbie", got.Name)
		require.False(t, got.Superuser)
		events := b.events(t)
		require.Equal(t, []event{
			{Actor: got.ID, Issuer: "oidc", Action: "user.create", Subject: got.ID, Result: "ok"},
			{Actor: got.ID, Issuer: "oidc", Action: "user.login", Subject: got.ID, Result: "ok"},
		}, events)

		// The second log-in finds the account it made.
		again, err := b.login(t, nil)
		require.NoError(t, err)
		require.Equal(t, got.ID, again.ID)

		// No password is usable: none was ever shown.
		for _, guess := range []string{"", "newbie"} {
			_, err = b.svc.Authenticate(ctx, "newbie", guess, "")
			require.ErrorIs(t, err, auth.ErrBadCredentials)
		}
	})

	t.Run("a name fedhost cannot have", func(t *testing.T) {
		t.Parallel()
		b := setupOIDC(t, func(c *auth.OIDCConfig) { c.CreateUsers = true })
		b.p.As(map[string]any{"sub": "u-9", "preferred_username": "Eve Smith"})
		_, err := b.login(t, nil)
		require.ErrorIs(t, err, auth.ErrOIDCRefused)
		require.ErrorContains(t, err, "the preferred_username claim of the ID token cannot be a fedhost user name")
		require.NotContains(t, err.Error(), "Eve Smith", "the claim is not echoed")
	})
}

func TestOIDCRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		tamper     func(claims map[string]any)
		edit       func(code, state *string)
		wantReason string
		wantError  string
	}{
		{
			name:       "wrong state",
			edit:       func(_, state *string) { *state = "forged" },
			wantReason: "state",
			wantError:  "the log-in was not begun in this browser, or took more than 10 minutes: log in again",
		},
		{
			name:       "no state",
			edit:       func(_, state *string) { *state = "" },
			wantReason: "state",
		},
		{
			name:       "code of no log-in",
			edit:       func(code, _ *string) { *code = "made-up" },
			wantReason: "code exchange",
			wantError:  "the OpenID provider did not accept the authorization code: log in again",
		},
		{
			name:       "another audience",
			tamper:     func(c map[string]any) { c["aud"] = "another-client" },
			wantReason: "id token",
			wantError:  "the ID token of the OpenID provider is not valid for fedhost (issuer, audience or signature): tell your hosting provider",
		},
		{
			name:       "another issuer",
			tamper:     func(c map[string]any) { c["iss"] = "https://id.example.org" },
			wantReason: "id token",
		},
		{
			name:       "expired",
			tamper:     func(c map[string]any) { c["exp"] = c["iat"].(int64) - 1 },
			wantReason: "id token expiry",
			wantError:  "the ID token of the OpenID provider has expired: check the clocks of fedhost and the provider, and log in again",
		},
		{
			name:       "another nonce",
			tamper:     func(c map[string]any) { c["nonce"] = "of another log-in" },
			wantReason: "nonce",
			wantError:  "the ID token was not issued for this log-in: log in again",
		},
		{
			name:       "no nonce",
			tamper:     func(c map[string]any) { delete(c, "nonce") },
			wantReason: "nonce",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOIDC(t, nil)
			_, _, err := b.svc.CreateUser(context.Background(), "alice", false)
			require.NoError(t, err)
			b.p.As(map[string]any{"sub": "u-1", "preferred_username": "alice"})
			b.p.SetTamper(tt.tamper)

			_, err = b.login(t, tt.edit)
			require.ErrorIs(t, err, auth.ErrOIDCRefused)
			if tt.wantError != "" {
				require.EqualError(t, err, "single sign-on refused: "+tt.wantError)
			}
			require.Equal(t, event{Issuer: "oidc", Action: "user.login", Result: "denied", Reason: tt.wantReason}, b.lastEvent(t))
		})
	}
}

func TestOIDCWrongVerifier(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, nil)
	_, _, err := b.svc.CreateUser(context.Background(), "alice", false)
	require.NoError(t, err)
	b.p.As(map[string]any{"sub": "u-1", "preferred_username": "alice"})

	// The code of one log-in with the verifier of another: the provider refuses it.
	authURL, state, nonce, _ := b.oidc.AuthURL()
	_, _, _, otherVerifier := b.oidc.AuthURL()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(authURL)
	require.NoError(t, err)
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	_, err = b.oidc.Finish(context.Background(), back.Query().Get("code"), state, nonce, otherVerifier, back.Query().Get("state"))
	require.ErrorIs(t, err, auth.ErrOIDCRefused)
	require.Equal(t, "code exchange", b.lastEvent(t).Reason)
}

func TestOIDCDisabledUser(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, nil)
	ctx := context.Background()
	u, _, err := b.svc.CreateUser(ctx, "alice", false)
	require.NoError(t, err)
	require.NoError(t, b.svc.SetDisabled(ctx, "alice", true))

	b.p.As(map[string]any{"sub": "u-1", "preferred_username": "alice"})
	_, err = b.login(t, nil)
	require.ErrorIs(t, err, auth.ErrOIDCRefused)
	require.EqualError(t, err, `single sign-on refused: the fedhost account "alice" is disabled: ask a superuser to enable it`)
	require.Equal(t, event{Actor: u.ID, Issuer: "oidc", Action: "user.login", Subject: u.ID, Result: "denied", Reason: "disabled"}, b.lastEvent(t))
}

func TestOIDCSuperuserGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("members are superusers, others not", func(t *testing.T) {
		t.Parallel()
		b := setupOIDC(t, func(c *auth.OIDCConfig) { c.SuperuserGroup = "fedhost-admins" })
		u, _, err := b.svc.CreateUser(ctx, "alice", false)
		require.NoError(t, err)

		b.p.As(map[string]any{"sub": "u-1", "preferred_username": "alice", "groups": []string{"staff", "fedhost-admins"}})
		got, err := b.login(t, nil)
		require.NoError(t, err)
		require.True(t, got.Superuser)
		events := b.events(t)
		require.Equal(t, event{Actor: u.ID, Issuer: "oidc", Action: "user.promote", Subject: u.ID, Result: "ok"}, events[len(events)-2])
		require.True(t, b.sessionUser(t, got.ID).Superuser, "stored, not only returned")

		// Out of the group at the provider: no longer a superuser at the next log-in.
		b.p.As(map[string]any{"sub": "u-1", "preferred_username": "alice", "groups": []string{"staff"}})
		got, err = b.login(t, nil)
		require.NoError(t, err)
		require.False(t, got.Superuser)
		events = b.events(t)
		require.Equal(t, event{Actor: u.ID, Issuer: "oidc", Action: "user.demote", Subject: u.ID, Result: "ok"}, events[len(events)-2])
		require.False(t, b.sessionUser(t, got.ID).Superuser)
	})

	t.Run("created as a member", func(t *testing.T) {
		t.Parallel()
		b := setupOIDC(t, func(c *auth.OIDCConfig) { c.SuperuserGroup, c.CreateUsers = "fedhost-admins", true })
		b.p.As(map[string]any{"sub": "u-5", "preferred_username": "root2", "groups": "fedhost-admins"})
		got, err := b.login(t, nil)
		require.NoError(t, err)
		require.True(t, got.Superuser)
	})

	t.Run("without superuser_group the provider's groups change nothing", func(t *testing.T) {
		t.Parallel()
		b := setupOIDC(t, nil)
		_, _, err := b.svc.CreateUser(ctx, "root", true)
		require.NoError(t, err)
		b.p.As(map[string]any{"sub": "u-6", "preferred_username": "root", "groups": []string{}})
		got, err := b.login(t, nil)
		require.NoError(t, err)
		require.True(t, got.Superuser)
	})
}

func (b oidcBundle) sessionUser(t *testing.T, userID string) auth.User {
	t.Helper()
	ns, err := b.svc.NewSession(context.Background(), userID)
	require.NoError(t, err)
	sess, err := b.svc.Session(context.Background(), ns.ID)
	require.NoError(t, err)
	return sess.User
}

func TestNewOIDCUnreachable(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	_, err := auth.NewOIDC(context.Background(), b.svc, auth.OIDCConfig{Issuer: srv.URL, ClientID: testClientID, ClientSecret: testClientSecret, RedirectURL: testRedirectURL})
	require.ErrorContains(t, err, "reading the discovery document of the OpenID provider "+srv.URL)
	require.ErrorContains(t, err, "check operator_oidc.issuer")
	require.NotContains(t, err.Error(), testClientSecret)
}
