package queue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

// TestBuildsOfADeadHostFail: a build left running by a host that stopped beating (killed
// with -9) is failed as lost by the leader of the survivors within a bounded time,
// while the running build of a live host is left alone, and the next submit completes.
func TestBuildsOfADeadHostFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t, store.Config{Database: pgtest.DSN(t)})
	pool := st.RiverPgx()

	// What a host killed in the middle of a build leaves: its build and job running, and
	// its last heartbeat long ago. The live host beat just now.
	running := func(host string) store.Build {
		b := newBuild(t, st)
		require.NoError(t, st.SetBuildState(ctx, b.ID, store.BuildRunning, ""))
		args, err := json.Marshal(buildArgs{BuildID: b.ID, DeploymentID: b.DeploymentID})
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, attempted_by)
			VALUES ($1, 'build', 25, 'default', 'running', 1, now(), ARRAY[$2::text])`, args, host)
		require.NoError(t, err)
		return b
	}
	dead, alive := running("host-dead"), running("host-alive")
	_, err := pool.Exec(ctx, `INSERT INTO fedhost_hosts (client_id, seen_at) VALUES ('host-dead', now() - interval '1 minute'), ('host-alive', now())`)
	require.NoError(t, err)

	started := time.Now()
	q := newQueueOf(t, st, Config{ClientID: "host-survivor", Builder: BuilderFunc(func(context.Context, string, func(step, message string)) error { return nil })})
	require.NoError(t, q.Start(ctx))
	failed := waitForState(t, st, dead.ID, store.BuildFailed)
	t.Logf("the dead host's build failed as lost %s after the survivor started", time.Since(started).Round(time.Millisecond))
	require.Equal(t, lostReason, failed.Reason)
	require.Contains(t, messages(t, st, dead.ID), "queue: "+lostReason)

	got, err := st.GetBuild(ctx, alive.ID)
	require.NoError(t, err)
	require.Equal(t, store.BuildRunning, got.State, "a live host's build runs on")

	next, err := st.CreateBuild(ctx, dead.DeploymentID)
	require.NoError(t, err)
	require.NoError(t, q.EnqueueBuild(ctx, next.ID))
	waitForState(t, st, next.ID, store.BuildSucceeded)

	var seen int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fedhost_hosts WHERE client_id = 'host-survivor'`).Scan(&seen))
	require.Equal(t, 1, seen, "the survivor beats")
}
