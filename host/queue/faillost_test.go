package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// River records the queue's ClientID on the jobs it runs, and FailLost fails only the
// builds last attempted by its own ClientID: those of another host running on the same
// database are left alone.
func TestFailLostTakesOnlyItsOwnBuilds(t *testing.T) {
	drivers(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		block := make(chan struct{})
		started := make(chan struct{}, 1)
		q, err := New(st, Config{ClientID: "fedhost@a:/srv/fedhost", Builder: BuilderFunc(func(ctx context.Context, _ string, _ func(string, string)) error {
			started <- struct{}{}
			select {
			case <-block:
			case <-ctx.Done():
			}
			return nil
		})})
		require.NoError(t, err)
		require.NoError(t, q.Start(ctx))
		t.Cleanup(func() { close(block); _ = q.Stop(context.Background()) })
		b := newBuild(t, st)
		require.NoError(t, q.EnqueueBuild(ctx, b.ID))
		<-started

		other, err := New(st, Config{ClientID: "fedhost@b:/srv/fedhost", Builder: BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
		require.NoError(t, err)
		ids, err := other.FailLost(ctx)
		require.NoError(t, err)
		require.Empty(t, ids, "host b does not take host a's running build for lost")
		require.Equal(t, store.BuildRunning, waitForState(t, st, b.ID, store.BuildRunning).State)

		// Host a restarts (same ClientID) and finds the build it left running.
		restarted, err := New(st, Config{ClientID: "fedhost@a:/srv/fedhost", Builder: BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
		require.NoError(t, err)
		ids, err = restarted.FailLost(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{b.ID}, ids)
		failed := waitForState(t, st, b.ID, store.BuildFailed)
		require.Contains(t, failed.Reason, "lost")
	})
}
