package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

func nopBuilder() Builder {
	return BuilderFunc(func(context.Context, string, func(step, message string)) error { return nil })
}

// TestRunsOfLocalNodesStayOnTheirHost: an operation run of a deployment on `local` nodes
// runs on the host that holds the nodes, whichever host queued it, as its builds do.
func TestRunsOfLocalNodesStayOnTheirHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t, store.Config{Database: pgtest.DSN(t)})
	var mu sync.Mutex
	ranOn := map[string]string{}
	done := make(chan string, 8)
	runnerOf := func(host string) Runner {
		return RunnerFunc(func(_ context.Context, runID string, _ int64) error {
			mu.Lock()
			ranOn[runID] = host
			mu.Unlock()
			done <- runID
			return nil
		})
	}
	a := newQueueOf(t, st, Config{Builder: nopBuilder(), Runner: runnerOf("host-a"), ClientID: "host-a", LocalNodes: true})
	b := newQueueOf(t, st, Config{Builder: nopBuilder(), Runner: runnerOf("host-b"), ClientID: "host-b", LocalNodes: true})
	require.NoError(t, a.Start(ctx))
	require.NoError(t, b.Start(ctx))

	build := newBuild(t, st)
	owner, err := st.ClaimNodeHost(ctx, build.DeploymentID, "host-a")
	require.NoError(t, err)
	require.Equal(t, "host-a", owner)
	for i := range 4 {
		r, err := st.CreateRun(ctx, store.Run{DeploymentID: build.DeploymentID, App: "miniflux", Operation: "refresh-feeds", Actor: "test", Trigger: store.RunManual, Input: "{}"})
		require.NoError(t, err)
		require.NoError(t, []*Queue{a, b}[i%2].EnqueueRun(ctx, r.ID, owner))
		select {
		case id := <-done:
			require.Equal(t, r.ID, id)
		case <-time.After(waitFor):
			t.Fatalf("run %d did not run", i+1)
		}
		var queue string
		require.NoError(t, st.RiverPgx().QueryRow(ctx, `SELECT queue FROM river_job WHERE kind = 'run' AND args->>'run_id' = $1`, r.ID).Scan(&queue))
		require.Equal(t, hostRunsQueue("host-a"), queue, "run %d is queued for the node host", i+1)
		mu.Lock()
		require.Equal(t, "host-a", ranOn[r.ID], "run %d ran on the node host", i+1)
		mu.Unlock()
	}
}

// TestWorkOfALostNodeHostFails: builds and runs waiting in the queue of a host not seen for
// lostAfter (its deployments' `local` nodes are there, and nowhere else) are failed by the
// leader, saying which host to start again, while those of a live host wait on.
func TestWorkOfALostNodeHostFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t, store.Config{Database: pgtest.DSN(t)})
	_, err := st.RiverPgx().Exec(ctx, `INSERT INTO fedhost_hosts (client_id, seen_at) VALUES ('host-gone', now() - interval '1 minute'), ('host-alive', now())`)
	require.NoError(t, err)
	q := newQueueOf(t, st, Config{Builder: nopBuilder(), ClientID: "host-survivor"})
	onHost := func(host string) (store.Build, store.Run) {
		b := newBuild(t, st)
		_, err := st.ClaimNodeHost(ctx, b.DeploymentID, host)
		require.NoError(t, err)
		require.NoError(t, q.EnqueueBuild(ctx, b.ID))
		r, err := st.CreateRun(ctx, store.Run{DeploymentID: b.DeploymentID, App: "miniflux", Operation: "refresh-feeds", Actor: "test", Trigger: store.RunManual, Input: "{}"})
		require.NoError(t, err)
		require.NoError(t, q.EnqueueRun(ctx, r.ID, host))
		return b, r
	}
	goneBuild, goneRun := onHost("host-gone")
	aliveBuild, aliveRun := onHost("host-alive")

	started := time.Now()
	require.NoError(t, q.Start(ctx))
	failed := waitForState(t, st, goneBuild.ID, store.BuildFailed)
	t.Logf("the build waiting for a lost node host failed %s after the leader started", time.Since(started).Round(time.Millisecond))
	require.Contains(t, failed.Reason, "local nodes run on host-gone")
	require.Contains(t, failed.Reason, "start fedhost there again")
	require.Contains(t, messages(t, st, goneBuild.ID), "queue: "+failed.Reason)
	require.Eventually(t, func() bool {
		r, err := st.GetRun(ctx, goneRun.ID)
		require.NoError(t, err)
		return r.State == store.RunFailed
	}, waitFor, 10*time.Millisecond, "the run waiting for the lost node host fails")

	got, err := st.GetBuild(ctx, aliveBuild.ID)
	require.NoError(t, err)
	require.Equal(t, store.BuildQueued, got.State, "a live host's build waits for it")
	r, err := st.GetRun(ctx, aliveRun.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, r.State, "a live host's run waits for it")
}
