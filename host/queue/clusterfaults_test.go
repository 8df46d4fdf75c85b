package queue

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
	"github.com/fedhost/fedhost/scheduler"
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

// TestScheduledRunsOnceAcrossLeaderHandover: when the leader goes, the host elected next
// starts the schedule afresh and runs its jobs at once (RunOnStart), but not a scheduled
// time the leader before it ran: the record holds one job per periodic job and time.
func TestScheduledRunsOnceAcrossLeaderHandover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t, store.Config{Database: pgtest.DSN(t)})
	type ran struct{ host, job string }
	runs := make(chan ran, 64)
	job := func(host, id, schedule string) Periodic {
		return Periodic{ID: id, Schedule: schedule, Run: func(context.Context, time.Time) error {
			runs <- ran{host, id}
			return nil
		}}
	}
	// Due once a year, so both leaders see the same scheduled time. Only host-b has the
	// probe, due every second: its first run shows that host-b's schedule started.
	a := newQueueOf(t, st, Config{Builder: nopBuilder(), ClientID: "host-a", Periodic: []Periodic{job("host-a", "yearly", "0 0 1 1 *")}})
	b := newQueueOf(t, st, Config{Builder: nopBuilder(), ClientID: "host-b", Periodic: []Periodic{job("host-b", "yearly", "0 0 1 1 *"), job("host-b", "probe", "@every 1s")}})
	wait := func(want ran) {
		t.Helper()
		for {
			select {
			case got := <-runs:
				require.NotEqual(t, "yearly", got.job, "the yearly job ran again, on %s", got.host)
				if got == want {
					return
				}
			case <-time.After(waitFor):
				t.Fatalf("%s never ran on %s", want.job, want.host)
			}
		}
	}
	require.NoError(t, a.Start(ctx))
	select {
	case got := <-runs:
		require.Equal(t, ran{"host-a", "yearly"}, got)
	case <-time.After(waitFor):
		t.Fatal("the leader did not run the yearly job")
	}

	require.NoError(t, b.Start(ctx))
	handover := time.Now()
	stopCtx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	require.NoError(t, a.Stop(stopCtx)) // the leader resigns; host-b is elected
	wait(ran{"host-b", "probe"})
	t.Logf("host-b scheduled %s after the leader stopped", time.Since(handover).Round(time.Millisecond))
	// Its first runs were inserted together: the yearly one was refused as a duplicate.
	// Give a duplicate the time to run anyway.
	deadline := time.After(time.Second)
	for done := false; !done; {
		select {
		case got := <-runs:
			require.NotEqual(t, "yearly", got.job, "the yearly job ran again, on %s", got.host)
		case <-deadline:
			done = true
		}
	}

	rows, err := st.RiverPgx().Query(ctx, `SELECT args FROM river_job WHERE kind = 'periodic' AND args->>'id' = 'yearly'`)
	require.NoError(t, err)
	defer rows.Close()
	var times []time.Time
	for rows.Next() {
		var raw []byte
		require.NoError(t, rows.Scan(&raw))
		var args periodicArgs
		require.NoError(t, json.Unmarshal(raw, &args))
		times = append(times, args.At)
	}
	require.NoError(t, rows.Err())
	now := time.Now().UTC()
	require.Equal(t, []time.Time{time.Date(now.Year(), 1, 1, 0, 0, 0, 0, time.UTC)}, times, "one yearly job, for this year's scheduled time")
}

func TestScheduledTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 4, 30, 17, 0, time.UTC)
	for spec, want := range map[string]time.Time{
		"@hourly":                            time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC),
		"@daily":                             time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		"30 4 * * *":                         time.Date(2026, 3, 1, 4, 30, 0, 0, time.UTC),
		"31 4 * * *":                         time.Date(2026, 2, 28, 4, 31, 0, 0, time.UTC),
		"0 0 1 1 *":                          time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		"@every 10s":                         time.Date(2026, 3, 1, 4, 30, 10, 0, time.UTC),
		"@every 1m":                          time.Date(2026, 3, 1, 4, 30, 0, 0, time.UTC),
		"CRON_TZ=Europe/Amsterdam 0 3 * * *": time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC),
	} {
		s, err := scheduler.ParseCron(spec)
		require.NoError(t, err, spec)
		require.Equal(t, want, scheduledTime(s, at), spec)
	}
}
