package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// A password link is found by its digest, replaced by a newer one of the same user, used
// once, listed while it has not expired, and pruned after; it goes with its deployment.
func TestPasswordLinks(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}"})
		require.NoError(t, err)
		now := time.Now()
		first := store.PasswordLink{TokenHash: "h1", DeploymentID: d.ID, UserName: "alice", Purpose: store.LinkInvitation, CreatedBy: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		require.NoError(t, st.ReplacePasswordLink(ctx, first))
		got, err := st.PasswordLinkByHash(ctx, "h1")
		require.NoError(t, err)
		require.Equal(t, "alice", got.UserName)
		require.WithinDuration(t, first.ExpiresAt, got.ExpiresAt, time.Millisecond)

		second := first
		second.TokenHash, second.Purpose = "h2", store.LinkReset
		require.NoError(t, st.ReplacePasswordLink(ctx, second))
		_, err = st.PasswordLinkByHash(ctx, "h1")
		require.True(t, errors.Is(err, store.ErrNotFound), "the newer link replaces the older: %v", err)
		pending, err := st.PendingPasswordLinks(ctx, d.ID, now)
		require.NoError(t, err)
		require.Equal(t, store.LinkReset, pending["alice"].Purpose)
		pending, err = st.PendingPasswordLinks(ctx, d.ID, now.Add(2*time.Hour))
		require.NoError(t, err)
		require.Empty(t, pending)

		took, err := st.TakePasswordLink(ctx, "h2")
		require.NoError(t, err)
		require.True(t, took)
		took, err = st.TakePasswordLink(ctx, "h2")
		require.NoError(t, err)
		require.False(t, took, "a link is used once")

		bob := store.PasswordLink{TokenHash: "h3", DeploymentID: d.ID, UserName: "bob", Purpose: store.LinkInvitation, CreatedBy: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
		require.NoError(t, st.ReplacePasswordLink(ctx, bob))
		n, err := st.DeleteExpiredPasswordLinks(ctx, now.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.NoError(t, st.ReplacePasswordLink(ctx, bob))
		require.NoError(t, st.DeletePasswordLinks(ctx, d.ID, "bob"))
		_, err = st.PasswordLinkByHash(ctx, "h3")
		require.True(t, errors.Is(err, store.ErrNotFound))

		bob.DeploymentID = "nosuch"
		require.True(t, errors.Is(st.ReplacePasswordLink(ctx, bob), store.ErrNotFound))
	})
}
