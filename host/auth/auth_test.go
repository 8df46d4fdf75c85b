package auth_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func drivers(t *testing.T, test func(t *testing.T, cfg store.Config)) { storetest.Drivers(t, test) }

type clock = storetest.Clock

type bundle struct {
	svc   *auth.Service
	log   *audit.Log
	clock *clock
	raw   *sql.DB
}

func setup(t *testing.T, cfg store.Config) bundle {
	t.Helper()
	st := storetest.Open(t, cfg)
	c := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	log := audit.New(st, audit.Options{Now: c.Now})
	return bundle{svc: auth.New(st, auth.Options{Audit: log, Now: c.Now}), log: log, clock: c, raw: storetest.RawDB(t, cfg)}
}

func TestPasswordHash(t *testing.T) {
	t.Parallel()
	hash := auth.HashPassword("correct horse", auth.DefaultParams)
	require.Regexp(t, `^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`, hash)
	require.NotEqual(t, hash, auth.HashPassword("correct horse", auth.DefaultParams), "each hash has its own salt")

	ok, err := auth.CheckPassword(hash, "correct horse")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = auth.CheckPassword(hash, "correct horsE")
	require.NoError(t, err)
	require.False(t, ok)

	_, err = auth.CheckPassword("$2a$10$bcrypt", "x")
	require.Error(t, err)
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)

		password, err := b.svc.EnsureAdmin(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, password)
		again, err := b.svc.EnsureAdmin(ctx)
		require.NoError(t, err)
		require.Empty(t, again, "admin is made only when no user exists")

		u, err := b.svc.Authenticate(ctx, "admin", password, "192.0.2.1")
		require.NoError(t, err)
		require.Equal(t, "admin", u.Name)
		require.True(t, u.Superuser)

		_, err = b.svc.Authenticate(ctx, "admin", "wrong", "192.0.2.1")
		require.ErrorIs(t, err, auth.ErrBadCredentials)
		_, err = b.svc.Authenticate(ctx, "nobody", "wrong", "192.0.2.1")
		require.ErrorIs(t, err, auth.ErrBadCredentials, "an unknown user gets the same answer")
		require.Equal(t, "wrong user name or password", err.Error())

		_, _, err = b.svc.CreateUser(ctx, "admin", false)
		require.ErrorIs(t, err, store.ErrConflict)
		_, _, err = b.svc.CreateUser(ctx, "Not Valid", false)
		require.ErrorContains(t, err, "user name: use 1 to 64 lowercase letters")
		require.NotContains(t, err.Error(), "Not Valid", "the error does not echo the name")

		alice, alicePassword, err := b.svc.CreateUser(ctx, "alice", false)
		require.NoError(t, err)
		require.False(t, alice.Superuser)
		require.NoError(t, b.svc.Promote(ctx, "alice"))
		newPassword, err := b.svc.ResetPassword(ctx, "alice")
		require.NoError(t, err)
		_, err = b.svc.Authenticate(ctx, "alice", alicePassword, "192.0.2.3")
		require.ErrorIs(t, err, auth.ErrBadCredentials, "the old password is gone")
		u, err = b.svc.Authenticate(ctx, "alice", newPassword, "192.0.2.3")
		require.NoError(t, err)
		require.True(t, u.Superuser)

		require.NoError(t, b.svc.SetDisabled(ctx, "alice", true))
		_, err = b.svc.Authenticate(ctx, "alice", newPassword, "192.0.2.3")
		require.ErrorIs(t, err, auth.ErrBadCredentials)
		require.ErrorIs(t, b.svc.Promote(ctx, "nobody"), store.ErrNotFound)

		users, err := b.svc.Users(ctx)
		require.NoError(t, err)
		require.Len(t, users, 2)
		require.Equal(t, "admin", users[0].Name)
		require.True(t, users[1].Disabled)
	})
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		_, password, err := b.svc.CreateUser(ctx, "bob", false)
		require.NoError(t, err)

		for i := range 5 {
			_, err := b.svc.Authenticate(ctx, "bob", "guess", fmt.Sprintf("192.0.2.%d", i))
			require.ErrorIs(t, err, auth.ErrBadCredentials, "failure %d", i+1)
			b.clock.Add(time.Minute)
		}
		_, err = b.svc.Authenticate(ctx, "bob", password, "198.51.100.1")
		require.ErrorIs(t, err, auth.ErrRateLimited, "the 6th attempt is refused, even with the right password")
		for range 5 {
			_, err = b.svc.Authenticate(ctx, "ghost", "guess", "198.51.100.2")
			require.ErrorIs(t, err, auth.ErrBadCredentials)
		}
		_, err = b.svc.Authenticate(ctx, "ghost", "guess", "198.51.100.2")
		require.ErrorIs(t, err, auth.ErrRateLimited, "an unknown user is limited alike")

		// The first failure leaves the 15-minute window 11 minutes from now.
		b.clock.Add(11 * time.Minute)
		u, err := b.svc.Authenticate(ctx, "bob", password, "198.51.100.1")
		require.NoError(t, err)
		require.Equal(t, "bob", u.Name)
	})
}

func TestClientRateLimit(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		_, password, err := b.svc.CreateUser(ctx, "carol", false)
		require.NoError(t, err)
		for i := range 20 {
			_, err := b.svc.Authenticate(ctx, fmt.Sprint("user", i), "guess", "203.0.113.9")
			require.ErrorIs(t, err, auth.ErrBadCredentials)
		}
		_, err = b.svc.Authenticate(ctx, "carol", password, "203.0.113.9")
		require.ErrorIs(t, err, auth.ErrRateLimited)
		_, err = b.svc.Authenticate(ctx, "carol", password, "203.0.113.10")
		require.NoError(t, err, "another address is not limited")
		b.clock.Add(auth.FailureWindow)
		_, err = b.svc.Authenticate(ctx, "carol", password, "203.0.113.9")
		require.NoError(t, err)
	})
}

func TestSessions(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		u, _, err := b.svc.CreateUser(ctx, "dave", false)
		require.NoError(t, err)

		ns, err := b.svc.NewSession(ctx, u.ID)
		require.NoError(t, err)
		require.NotEqual(t, ns.ID, ns.CSRFToken)
		s, err := b.svc.Session(ctx, ns.ID)
		require.NoError(t, err)
		require.Equal(t, "dave", s.User.Name)
		require.Equal(t, ns.CSRFToken, s.CSRFToken)
		_, err = b.svc.Session(ctx, "made-up")
		require.ErrorIs(t, err, auth.ErrNoSession)

		// Idle: used every 11 hours it lives, 12 hours unused it ends.
		for range 3 {
			b.clock.Add(11 * time.Hour)
			_, err = b.svc.Session(ctx, ns.ID)
			require.NoError(t, err)
		}
		b.clock.Add(12 * time.Hour)
		_, err = b.svc.Session(ctx, ns.ID)
		require.ErrorIs(t, err, auth.ErrNoSession)

		// Absolute: however active, a session ends after 7 days.
		ns, err = b.svc.NewSession(ctx, u.ID)
		require.NoError(t, err)
		for elapsed := time.Duration(0); elapsed < auth.SessionLifetime-11*time.Hour; elapsed += 11 * time.Hour {
			b.clock.Add(11 * time.Hour)
			_, err = b.svc.Session(ctx, ns.ID)
			require.NoError(t, err)
		}
		b.clock.Add(11 * time.Hour)
		_, err = b.svc.Session(ctx, ns.ID)
		require.ErrorIs(t, err, auth.ErrNoSession)

		// A logout ends it, and so does a password reset.
		ns, err = b.svc.NewSession(ctx, u.ID)
		require.NoError(t, err)
		require.NoError(t, b.svc.EndSession(ctx, ns.ID))
		_, err = b.svc.Session(ctx, ns.ID)
		require.ErrorIs(t, err, auth.ErrNoSession)
		ns, err = b.svc.NewSession(ctx, u.ID)
		require.NoError(t, err)
		_, err = b.svc.ResetPassword(ctx, "dave")
		require.NoError(t, err)
		_, err = b.svc.Session(ctx, ns.ID)
		require.ErrorIs(t, err, auth.ErrNoSession)
	})
}

func TestTokens(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		u, _, err := b.svc.CreateUser(ctx, "erin", false)
		require.NoError(t, err)

		_, _, err = b.svc.NewToken(ctx, u.ID, "ci", 366*24*time.Hour)
		require.ErrorContains(t, err, "between 1 second and 1 year")
		value, tok, err := b.svc.NewToken(ctx, u.ID, "ci", 30*24*time.Hour)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(value, "fh_"))
		require.Equal(t, "ci", tok.Name)

		owner, err := b.svc.TokenOwner(ctx, value)
		require.NoError(t, err)
		require.Equal(t, u.ID, owner.ID)
		_, err = b.svc.TokenOwner(ctx, "fh_made-up")
		require.ErrorIs(t, err, auth.ErrBadToken)

		b.clock.Add(30 * 24 * time.Hour)
		_, err = b.svc.TokenOwner(ctx, value)
		require.ErrorIs(t, err, auth.ErrBadToken, "an expired token is refused")

		value, _, err = b.svc.NewToken(ctx, u.ID, "deploy", time.Hour)
		require.NoError(t, err)
		require.NoError(t, b.svc.SetDisabled(ctx, "erin", true))
		_, err = b.svc.TokenOwner(ctx, value)
		require.ErrorIs(t, err, auth.ErrBadToken, "a disabled user's token is refused")
	})
}

// TestNoSecretInTheAuditTrail dumps every audit row and looks for every
// password, session id, CSRF token and API token the test made, and for a
// password typed as a user name.
func TestNoSecretInTheAuditTrail(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := audit.WithActor(context.Background(), audit.Actor{ID: "cli", Issuer: audit.IssuerSystem})
		b := setup(t, cfg)
		var secrets []string
		add := func(s string) { secrets = append(secrets, s) }

		adminPassword, err := b.svc.EnsureAdmin(ctx)
		require.NoError(t, err)
		add(adminPassword)
		u, password, err := b.svc.CreateUser(ctx, "frank", false)
		require.NoError(t, err)
		add(password)
		password, err = b.svc.ResetPassword(ctx, "frank")
		require.NoError(t, err)
		add(password)
		_, err = b.svc.Authenticate(ctx, "frank", password, "192.0.2.1")
		require.NoError(t, err)
		_, err = b.svc.Authenticate(ctx, "frank", "Wrong-Guess-1", "192.0.2.1")
		require.Error(t, err)
		add("Wrong-Guess-1")
		_, err = b.svc.Authenticate(ctx, "Typed-My-Password-Here", "x", "192.0.2.2")
		require.Error(t, err)
		add("Typed-My-Password-Here")
		ns, err := b.svc.NewSession(ctx, u.ID)
		require.NoError(t, err)
		add(ns.ID)
		add(ns.CSRFToken)
		_, err = b.svc.Session(ctx, ns.ID)
		require.NoError(t, err)
		require.NoError(t, b.svc.EndSession(ctx, ns.ID))
		token, _, err := b.svc.NewToken(ctx, u.ID, "script", time.Hour)
		require.NoError(t, err)
		add(token)
		add(strings.TrimPrefix(token, "fh_"))
		_, err = b.svc.TokenOwner(ctx, token)
		require.NoError(t, err)
		require.NoError(t, b.log.Flush(ctx))

		rows, err := b.raw.Query(`SELECT * FROM audit_events ORDER BY seq`)
		require.NoError(t, err)
		defer rows.Close()
		cols, err := rows.Columns()
		require.NoError(t, err)
		var dump strings.Builder
		n := 0
		for rows.Next() {
			values := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range values {
				ptrs[i] = &values[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			fmt.Fprintln(&dump, values...)
			n++
		}
		require.NoError(t, rows.Err())
		require.GreaterOrEqual(t, n, 8, "the calls were recorded:\n%s", dump.String())
		for _, s := range secrets {
			require.NotContains(t, strings.ToLower(dump.String()), strings.ToLower(s))
		}
		require.Contains(t, dump.String(), "user.login")
		require.Contains(t, dump.String(), "token.create")

		_, err = b.log.Verify(ctx)
		require.NoError(t, err)
	})
}
