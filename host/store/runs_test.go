package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// Runs of apps' operations on both databases: one exclusive run per node at a time,
// output in order after a sequence number, the end recorded once, and pruning.
func TestRuns(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}"})
		require.NoError(t, err)
		_, err = st.CreateRun(ctx, store.Run{DeploymentID: "nope", App: "miniflux", Operation: "refresh-feeds", Input: "{}"})
		require.ErrorIs(t, err, store.ErrNotFound)

		newRun := func(exclusive bool) store.Run {
			r, err := st.CreateRun(ctx, store.Run{DeploymentID: d.ID, App: "miniflux", Operation: "refresh-feeds", Exclusive: exclusive,
				Actor: "alice", Trigger: store.RunManual, Input: "{}"})
			require.NoError(t, err)
			require.Equal(t, store.RunQueued, r.State)
			return r
		}
		first, second, beside := newRun(true), newRun(true), newRun(false)
		require.NoError(t, st.StartRun(ctx, first.ID, "web", 1))
		require.ErrorIs(t, st.StartRun(ctx, second.ID, "web", 2), store.ErrNodeBusy)
		require.NoError(t, st.StartRun(ctx, beside.ID, "web", 3), "a concurrent operation runs beside")
		require.ErrorIs(t, st.StartRun(ctx, first.ID, "web", 1), store.ErrBuildFinished, "a running run does not start again")

		for i, o := range []store.RunOutput{{Stream: "stdout", Data: "one\n"}, {Stream: "stderr", Data: "two\n"}, {Stream: "stdout", Data: "three\n"}} {
			o.RunID, o.Seq = first.ID, i+1
			require.NoError(t, st.AppendRunOutput(ctx, o))
		}
		out, err := st.RunOutputs(ctx, first.ID, 1, 10)
		require.NoError(t, err)
		require.Len(t, out, 2)
		require.Equal(t, "two\n", out[0].Data)
		require.Equal(t, "stderr", out[0].Stream)

		code := 0
		require.NoError(t, st.FinishRun(ctx, first.ID, store.RunEnd{State: store.RunSucceeded, Reason: "exited with status 0", ExitCode: &code, OutputBytes: 13}))
		require.ErrorIs(t, st.FinishRun(ctx, first.ID, store.RunEnd{State: store.RunFailed}), store.ErrBuildFinished)
		got, err := st.GetRun(ctx, first.ID)
		require.NoError(t, err)
		require.Equal(t, store.RunSucceeded, got.State)
		require.Equal(t, 0, *got.ExitCode)
		require.NotNil(t, got.FinishedAt)
		require.NoError(t, st.StartRun(ctx, second.ID, "web", 2), "the node is free once the first run ended")

		// Pruning keeps the newest RunsKept and what ended after the retention time.
		for i := 0; i < store.RunsKept+2; i++ {
			r := newRun(false)
			require.NoError(t, st.FinishRun(ctx, r.ID, store.RunEnd{State: store.RunCanceled, Reason: fmt.Sprint(i)}))
		}
		n, err := st.PruneRuns(ctx, d.ID, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Equal(t, int64(3), n, "beyond the newest 100 are the first three runs and two of the new ones; the two unfinished stay")
		runs, err := st.ListRuns(ctx, d.ID, 1000)
		require.NoError(t, err)
		require.Len(t, runs, store.RunsKept+2, "the two unfinished runs stay")
		_, err = st.GetRun(ctx, first.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		out, err = st.RunOutputs(ctx, first.ID, 0, 10)
		require.NoError(t, err)
		require.Empty(t, out, "its output went with it")

		n, err = st.PruneRuns(ctx, d.ID, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, int64(store.RunsKept), n, "every finished run ended before the retention time")
	})
}

// A run that waits for its node, held by a run whose end is being recorded, is started
// at a time after that end: the time is read once the node is taken, not before the wait.
func TestStartRunTimeIsReadOnceTheNodeIsTaken(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}"})
		require.NoError(t, err)
		var runs [2]store.Run
		for i := range runs {
			runs[i], err = st.CreateRun(ctx, store.Run{DeploymentID: d.ID, App: "miniflux", Operation: "refresh-feeds", Exclusive: true,
				Actor: "alice", Trigger: store.RunManual, Input: "{}"})
			require.NoError(t, err)
		}
		holder, waiter := runs[0], runs[1]
		require.NoError(t, st.StartRun(ctx, holder.ID, "web", 1))

		// The holder's end, not committed yet: the waiter's start waits for it.
		tx, err := rawDB(t, cfg).BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, "UPDATE runs SET state = 'canceled' WHERE id = $1", holder.ID)
		require.NoError(t, err)
		started := make(chan error, 1)
		go func() { started <- st.StartRun(ctx, waiter.ID, "web", 2) }()
		time.Sleep(300 * time.Millisecond)
		select {
		case err := <-started:
			require.FailNow(t, "the waiter started while the node was held", "%v", err)
		default:
		}
		ended := time.Now().UTC().Truncate(time.Microsecond)
		require.NoError(t, tx.Commit())
		require.NoError(t, <-started)

		got, err := st.GetRun(ctx, waiter.ID)
		require.NoError(t, err)
		require.Equal(t, store.RunRunning, got.State)
		require.NotNil(t, got.StartedAt)
		require.False(t, got.StartedAt.Before(ended), "started at %s, before the node was given up at %s", got.StartedAt, ended)
	})
}
