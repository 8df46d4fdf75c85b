package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// Of locks taken at once on one workspace exactly one wins, on both databases; the
// others see it; writes and unlocks need its ID, a force unlock does not; a workspace's
// lock holds no other.
func TestTerraformStateLocks(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		_, err := st.TerraformStateOf(ctx, "acme", "db")
		require.ErrorIs(t, err, store.ErrNotFound)

		ids := []string{"a", "b", "c", "d", "e", "f"}
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { errs[i] = st.LockTerraformState(ctx, "acme", "db", id, `{"ID":"`+id+`"}`) })
		}
		wg.Wait()
		winner := ""
		for i, err := range errs {
			if err == nil {
				require.Empty(t, winner, "two locks won")
				winner = ids[i]
				continue
			}
			require.ErrorIs(t, err, store.ErrTerraformLocked)
		}
		require.NotEmpty(t, winner)
		for _, err := range errs {
			var held *store.TerraformLockedError
			if errors.As(err, &held) {
				require.Equal(t, winner, held.ID)
				require.Equal(t, `{"ID":"`+winner+`"}`, held.Info)
			}
		}

		require.ErrorIs(t, st.PutTerraformState(ctx, "acme", "db", "sealed-1", ""), store.ErrTerraformLocked)
		require.ErrorIs(t, st.PutTerraformState(ctx, "acme", "db", "sealed-1", "zz"), store.ErrTerraformLocked)
		require.NoError(t, st.PutTerraformState(ctx, "acme", "db", "sealed-1", winner))
		require.NoError(t, st.PutTerraformState(ctx, "acme", "cache", "sealed-2", ""), "another workspace is not locked")
		require.ErrorIs(t, st.DeleteTerraformState(ctx, "acme", "db", ""), store.ErrTerraformLocked)
		require.ErrorIs(t, st.UnlockTerraformState(ctx, "acme", "db", "zz"), store.ErrTerraformLocked)
		row, err := st.TerraformStateOf(ctx, "acme", "db")
		require.NoError(t, err)
		require.Equal(t, "sealed-1", row.Sealed)
		require.Equal(t, winner, row.LockID)
		require.NotNil(t, row.LockedAt)

		require.NoError(t, st.UnlockTerraformState(ctx, "acme", "db", ""), "force unlock")
		require.NoError(t, st.LockTerraformState(ctx, "acme", "db", "g", `{"ID":"g"}`))
		require.NoError(t, st.UnlockTerraformState(ctx, "acme", "db", "g"))
		require.NoError(t, st.UnlockTerraformState(ctx, "acme", "db", "g"), "unlocking what is unlocked")
		require.NoError(t, st.UnlockTerraformState(ctx, "beta", "none", "g"), "unlocking a workspace that has nothing")
		require.NoError(t, st.DeleteTerraformState(ctx, "acme", "db", ""))
		_, err = st.TerraformStateOf(ctx, "acme", "db")
		require.ErrorIs(t, err, store.ErrNotFound)
		require.NoError(t, st.DeleteTerraformState(ctx, "acme", "db", ""), "deleting what is gone")
	})
}
