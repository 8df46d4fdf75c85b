package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/store"
)

// TestResetAndDisableTakeAccessAway: a password reset ends the account's sessions and
// revokes its tokens, and marks the new password to be changed; disabling does the same
// (issue 18, defect 4: a reset left tokens working).
func TestResetAndDisableTakeAccessAway(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		u, _, err := b.svc.CreateUser(ctx, "frank", false)
		require.NoError(t, err)
		token, _, err := b.svc.NewToken(ctx, u.ID, "ci", time.Hour)
		require.NoError(t, err)
		ns, err := b.svc.NewSession(ctx, u.ID)
		require.NoError(t, err)

		password, err := b.svc.ResetPassword(ctx, "frank")
		require.NoError(t, err)
		_, err = b.svc.TokenOwner(ctx, token)
		require.ErrorIs(t, err, auth.ErrBadToken, "a reset revokes the tokens")
		_, err = b.svc.Session(ctx, ns.ID)
		require.ErrorIs(t, err, auth.ErrNoSession)
		tokens, err := b.svc.Tokens(ctx, u.ID)
		require.NoError(t, err)
		require.Empty(t, tokens)
		got, err := b.svc.Authenticate(ctx, "frank", password, "192.0.2.1")
		require.NoError(t, err)
		require.True(t, got.MustChangePassword, "a generated password is to be changed")

		token, _, err = b.svc.NewToken(ctx, u.ID, "ci", time.Hour)
		require.NoError(t, err)
		require.NoError(t, b.svc.SetDisabled(ctx, "frank", true))
		require.NoError(t, b.svc.SetDisabled(ctx, "frank", false))
		_, err = b.svc.TokenOwner(ctx, token)
		require.ErrorIs(t, err, auth.ErrBadToken, "enabling again does not bring a revoked token back")
	})
}

func TestChangePassword(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		first, err := b.svc.EnsureAdmin(ctx)
		require.NoError(t, err)
		admin, err := b.svc.Authenticate(ctx, "admin", first, "192.0.2.1")
		require.NoError(t, err)
		require.True(t, admin.MustChangePassword, "the first start's password is to be changed")
		// The provider's token, made on the command line right after the first start.
		token, _, err := b.svc.NewToken(ctx, admin.ID, "cli", time.Hour)
		require.NoError(t, err)
		here, err := b.svc.NewSession(ctx, admin.ID)
		require.NoError(t, err)
		elsewhere, err := b.svc.NewSession(ctx, admin.ID)
		require.NoError(t, err)

		require.ErrorIs(t, b.svc.ChangePassword(ctx, admin.ID, "wrong", "a long new passphrase", here.ID, "192.0.2.1"), auth.ErrWrongPassword)
		var pe *auth.PasswordError
		require.ErrorAs(t, b.svc.ChangePassword(ctx, admin.ID, first, "short", here.ID, "192.0.2.1"), &pe)
		require.ErrorAs(t, b.svc.ChangePassword(ctx, admin.ID, first, first, here.ID, "192.0.2.1"), &pe)
		require.NotContains(t, pe.Error(), first)

		// Guessing the current password through a session is slowed as log-ins are.
		for range auth.PairFailures {
			require.ErrorIs(t, b.svc.ChangePassword(ctx, admin.ID, "guess", "a long new passphrase", here.ID, "192.0.2.66"), auth.ErrWrongPassword)
		}
		var limited *auth.RateLimitedError
		require.ErrorAs(t, b.svc.ChangePassword(ctx, admin.ID, first, "a long new passphrase", here.ID, "192.0.2.66"), &limited)

		require.NoError(t, b.svc.ChangePassword(ctx, admin.ID, first, "a long new passphrase", here.ID, "192.0.2.1"))
		s, err := b.svc.Session(ctx, here.ID)
		require.NoError(t, err, "the session the change came from stays")
		require.False(t, s.User.MustChangePassword)
		_, err = b.svc.Session(ctx, elsewhere.ID)
		require.ErrorIs(t, err, auth.ErrNoSession, "other sessions end")
		_, err = b.svc.TokenOwner(ctx, token)
		require.NoError(t, err, "tokens stay: the owner revokes them one by one")
		_, err = b.svc.Authenticate(ctx, "admin", first, "192.0.2.1")
		require.ErrorIs(t, err, auth.ErrBadCredentials)
		_, err = b.svc.Authenticate(ctx, "admin", "a long new passphrase", "192.0.2.1")
		require.NoError(t, err)
	})
}

func TestTokenListAndRevoke(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		u, _, err := b.svc.CreateUser(ctx, "gina", false)
		require.NoError(t, err)
		value, tok, err := b.svc.NewToken(ctx, u.ID, "backup script", time.Hour)
		require.NoError(t, err)
		_, _, err = b.svc.NewToken(ctx, u.ID, "deploy", time.Hour)
		require.NoError(t, err)

		tokens, err := b.svc.Tokens(ctx, u.ID)
		require.NoError(t, err)
		require.Len(t, tokens, 2)
		require.Equal(t, "backup script", tokens[0].Name)
		require.Nil(t, tokens[0].LastUsedAt, "never used")
		_, err = b.svc.TokenOwner(ctx, value)
		require.NoError(t, err)
		tokens, err = b.svc.Tokens(ctx, u.ID)
		require.NoError(t, err)
		require.NotNil(t, tokens[0].LastUsedAt)
		require.True(t, b.clock.Now().Equal(*tokens[0].LastUsedAt))

		require.NoError(t, b.svc.RevokeToken(ctx, tok.ID))
		_, err = b.svc.TokenOwner(ctx, value)
		require.ErrorIs(t, err, auth.ErrBadToken, "a revoked token is refused at once")
		require.ErrorIs(t, b.svc.RevokeToken(ctx, tok.ID), store.ErrNotFound)
		tokens, err = b.svc.Tokens(ctx, u.ID)
		require.NoError(t, err)
		require.Len(t, tokens, 1)
	})
}

// TestTheLastSuperuserStays: demoting, disabling or deleting the last active superuser
// is refused, so that somebody can always manage the accounts.
func TestTheLastSuperuserStays(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		_, err := b.svc.EnsureAdmin(ctx)
		require.NoError(t, err)
		require.ErrorIs(t, b.svc.Demote(ctx, "admin"), store.ErrLastSuperuser)
		require.ErrorIs(t, b.svc.SetDisabled(ctx, "admin", true), store.ErrLastSuperuser)
		require.ErrorIs(t, b.svc.DeleteUser(ctx, "admin"), store.ErrLastSuperuser)

		_, _, err = b.svc.CreateUser(ctx, "hank", true)
		require.NoError(t, err)
		require.NoError(t, b.svc.SetDisabled(ctx, "hank", true))
		require.ErrorIs(t, b.svc.Demote(ctx, "admin"), store.ErrLastSuperuser, "a disabled superuser does not count")
		require.NoError(t, b.svc.SetDisabled(ctx, "hank", false))
		require.NoError(t, b.svc.Demote(ctx, "admin"))
		require.ErrorIs(t, b.svc.DeleteUser(ctx, "hank"), store.ErrLastSuperuser)
		users, err := b.svc.Users(ctx)
		require.NoError(t, err)
		require.False(t, users[0].Superuser, "admin is an operator now")
	})
}

// TestDeleteRefusesAnOwnerOfDeployments: an account that owns deployments not destroyed
// stays, and the refusal says how many; once they are destroyed it goes with its tokens.
func TestDeleteRefusesAnOwnerOfDeployments(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		u, _, err := b.svc.CreateUser(ctx, "ivy", false)
		require.NoError(t, err)
		token, _, err := b.svc.NewToken(ctx, u.ID, "ci", time.Hour)
		require.NoError(t, err)
		var ids []string
		for _, ns := range []string{"ivy-one", "ivy-two"} {
			d, err := b.st.CreateDeployment(ctx, store.Deployment{Namespace: ns, Owner: u.ID, State: "active", Config: "{}", SecretRefs: "{}"})
			require.NoError(t, err)
			ids = append(ids, d.ID)
		}
		err = b.svc.DeleteUser(ctx, "ivy")
		require.ErrorIs(t, err, store.ErrOwnsDeployments)
		require.ErrorContains(t, err, "owns 2 deployments")

		for _, id := range ids {
			q := `UPDATE deployments SET state = 'destroyed' WHERE id = $1`
			if cfg.Database == "sqlite" {
				q = `UPDATE deployments SET state = 'destroyed' WHERE id = ?`
			}
			_, err := b.raw.Exec(q, id)
			require.NoError(t, err)
		}
		require.NoError(t, b.svc.DeleteUser(ctx, "ivy"))
		_, err = b.svc.TokenOwner(ctx, token)
		require.ErrorIs(t, err, auth.ErrBadToken)
		require.ErrorIs(t, b.svc.DeleteUser(ctx, "ivy"), store.ErrNotFound)
	})
}
