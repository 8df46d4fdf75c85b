package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

// TestLocalNodesStayOnTheirHost: with the `local` instance provider, the host that runs
// a deployment's first build holds its nodes, and every later build, whichever host
// queued it, runs on that host's own queue (docs/architecture.md, cluster mode).
func TestLocalNodesStayOnTheirHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t, store.Config{Database: pgtest.DSN(t)})
	var mu sync.Mutex
	ranOn := map[string]string{}
	hostOf := func(id string) Builder {
		return BuilderFunc(func(_ context.Context, buildID string, _ func(step, message string)) error {
			mu.Lock()
			defer mu.Unlock()
			ranOn[buildID] = id
			return nil
		})
	}
	a := newQueueOf(t, st, Config{Builder: hostOf("host-a"), ClientID: "host-a", LocalNodes: true})
	b := newQueueOf(t, st, Config{Builder: hostOf("host-b"), ClientID: "host-b", LocalNodes: true})

	// Only host-a runs at first, so it runs the first build and holds the nodes.
	require.NoError(t, a.Start(ctx))
	first := newBuild(t, st)
	require.NoError(t, a.EnqueueBuild(ctx, first.ID))
	waitForState(t, st, first.ID, store.BuildSucceeded)
	d, err := st.GetDeployment(ctx, first.DeploymentID)
	require.NoError(t, err)
	require.Equal(t, "host-a", d.NodeHost)

	require.NoError(t, b.Start(ctx))
	for i := range 4 {
		next, err := st.CreateBuild(ctx, first.DeploymentID)
		require.NoError(t, err)
		require.NoError(t, []*Queue{a, b}[i%2].EnqueueBuild(ctx, next.ID))
		waitForState(t, st, next.ID, store.BuildSucceeded)
		got, err := st.GetBuild(ctx, next.ID)
		require.NoError(t, err)
		var queue string
		require.NoError(t, st.RiverPgx().QueryRow(ctx, `SELECT queue FROM river_job WHERE id = $1`, got.JobID).Scan(&queue))
		require.Equal(t, hostQueue("host-a"), queue, "build %d is queued for the node host", i+2)
		mu.Lock()
		require.Equal(t, "host-a", ranOn[next.ID], "build %d ran on the node host", i+2)
		mu.Unlock()
	}

	// A job left in the shared queue (queued before the claim: a retry of a first build)
	// is not run on another host: it is handed over to the node host's queue, and waits
	// there for that host.
	other := newBuild(t, st)
	owner, err := st.ClaimNodeHost(ctx, other.DeploymentID, "host-z")
	require.NoError(t, err)
	require.Equal(t, "host-z", owner)
	owner, err = st.ClaimNodeHost(ctx, other.DeploymentID, "host-a")
	require.NoError(t, err)
	require.Equal(t, "host-z", owner, "the first claim stays")
	_, err = a.client.Insert(ctx, buildArgs{BuildID: other.ID, DeploymentID: other.DeploymentID}, &river.InsertOpts{Queue: river.QueueDefault})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, st.RiverPgx().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND args->>'build_id' = $2`, hostQueue("host-z"), other.ID).Scan(&n))
		return n == 1
	}, waitFor, 20*time.Millisecond, "the build is handed over to host-z's queue")
	got, err := st.GetBuild(ctx, other.ID)
	require.NoError(t, err)
	require.Equal(t, store.BuildQueued, got.State, "it waits for the node host")
	mu.Lock()
	require.Empty(t, ranOn[other.ID], "the builder never ran")
	mu.Unlock()
}
