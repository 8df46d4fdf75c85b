package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// newBackupEngine returns an engine on a fresh SQLite store whose queue takes builds but
// runs none, and an active deployment whose app "miniflux" has a database and a backups
// bucket.
func newBackupEngine(t *testing.T, clock *time.Time) (*Engine, store.Deployment) {
	t.Helper()
	return newBackupEngineOn(t, clock, "30 3 * * *")
}

// newBackupEngineOn is newBackupEngine with the backup schedule given.
func newBackupEngineOn(t *testing.T, clock *time.Time, schedule string) (*Engine, store.Deployment) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := New(Options{Store: st, Clock: func() time.Time { return *clock },
		BackupPolicy: func(string) BackupPolicy {
			return BackupPolicy{Schedule: schedule, KeepWithin: 30 * 24 * time.Hour}
		}})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	e.SetQueue(q)
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", State: StateActive, Config: "{}"})
	require.NoError(t, err)
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-db", App: "miniflux", Type: contract.PostgreSQL, Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-backups", App: "miniflux", Type: contract.S3, Spec: `{"buckets":{"backups":{"backup":true}}}`, Result: "{}", State: store.ResourceProvisioned}))
	return e, d
}

// The schedule counts from what the database records, at the time the engine is told:
// nothing before the first 03:30 after the app was first seen, one backup then, none
// while it is queued, and after a restart (a new engine on the same records) the
// schedule goes on from the last attempt.
func TestBackupScheduleFollowsTheRecordsAndTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	e, d := newBackupEngine(t, &now)

	queued, err := e.RunBackups(ctx, now)
	require.NoError(t, err)
	require.Empty(t, queued, "the schedule starts when the app is first seen")
	statuses, err := e.BackupStatuses(ctx, d)
	require.NoError(t, err)
	require.Len(t, statuses, 1)
	require.Equal(t, time.Date(2026, 5, 5, 3, 30, 0, 0, time.UTC), *statuses[0].NextAt)
	require.False(t, statuses[0].Stale)

	queued, err = e.RunBackups(ctx, time.Date(2026, 5, 5, 3, 29, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Empty(t, queued, "not before 03:30")

	at := time.Date(2026, 5, 5, 3, 31, 0, 0, time.UTC)
	queued, err = e.RunBackups(ctx, at)
	require.NoError(t, err)
	require.Len(t, queued, 1)
	require.Equal(t, store.OperationBackup, queued[0].Operation)
	var op Operation
	require.NoError(t, json.Unmarshal([]byte(queued[0].Config), &op))
	require.Equal(t, Operation{App: "miniflux", Trigger: store.BackupScheduled}, op)

	queued, err = e.RunBackups(ctx, at.Add(time.Minute))
	require.NoError(t, err)
	require.Empty(t, queued, "one build of a deployment at a time: the queued backup is not queued again")

	// The build runs and fails: the attempt is recorded, and shown.
	require.NoError(t, e.opts.Store.BackupStarted(ctx, d.ID, "miniflux", queued0(t, e, d).ID, store.BackupScheduled, at))
	require.NoError(t, e.opts.Store.BackupFinished(ctx, d.ID, "miniflux", "", "backup of miniflux: restic: the bucket is unreachable", at.Add(time.Minute)))
	require.NoError(t, e.opts.Store.SetBuildState(ctx, queued0(t, e, d).ID, store.BuildFailed, "backup of miniflux: restic: the bucket is unreachable"))

	// A new engine on the same database, as after a restart, some days later.
	now = time.Date(2026, 5, 6, 16, 0, 0, 0, time.UTC)
	e2 := New(e.opts)
	e2.SetQueue(e.queue)
	statuses, err = e2.BackupStatuses(ctx, d)
	require.NoError(t, err)
	s := statuses[0]
	require.True(t, s.Stale, "no good backup for more than 36 hours")
	require.Equal(t, 1, s.Failures)
	require.Contains(t, s.LastError, "unreachable")
	require.Equal(t, store.BackupScheduled, s.LastTrigger)
	require.Equal(t, time.Date(2026, 5, 6, 3, 30, 0, 0, time.UTC), *s.NextAt, "missed while no host ran")
	queued, err = e2.RunBackups(ctx, now)
	require.NoError(t, err)
	require.Len(t, queued, 1, "the missed run is taken at the first tick")

	// A good backup clears the failure and the staleness.
	require.NoError(t, e.opts.Store.BackupStarted(ctx, d.ID, "miniflux", queued[0].ID, store.BackupScheduled, now))
	require.NoError(t, e.opts.Store.BackupFinished(ctx, d.ID, "miniflux", "abcd1234", "", now.Add(time.Minute)))
	statuses, err = e2.BackupStatuses(ctx, d)
	require.NoError(t, err)
	s = statuses[0]
	require.False(t, s.Stale)
	require.Zero(t, s.Failures)
	require.Empty(t, s.LastError)
	require.Equal(t, "abcd1234", s.LastSnapshot)
}

// A schedule with CRON_TZ= is read in its zone: 03:00 in Amsterdam on the night the
// clocks go forward is 01:00 UTC (not 03:00 UTC, nor 02:00 as in winter).
func TestBackupScheduleInATimeZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	e, d := newBackupEngineOn(t, &now, "CRON_TZ=Europe/Amsterdam 0 3 * * *")
	_, err := e.RunBackups(ctx, now)
	require.NoError(t, err)
	statuses, err := e.BackupStatuses(ctx, d)
	require.NoError(t, err)
	require.True(t, statuses[0].NextAt.Equal(time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)), "next at %s", statuses[0].NextAt)

	queued, err := e.RunBackups(ctx, time.Date(2026, 3, 29, 0, 59, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Empty(t, queued, "not before 03:00 in Amsterdam")
	queued, err = e.RunBackups(ctx, time.Date(2026, 3, 29, 1, 1, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Len(t, queued, 1, "at 03:00 in Amsterdam, 01:00 UTC that night")
}

// queued0 returns the newest build of d.
func queued0(t *testing.T, e *Engine, d store.Deployment) store.Build {
	t.Helper()
	bs, err := e.opts.Store.ListBuilds(context.Background(), d.ID, 1)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	return bs[0]
}

func TestSuspendedDeploymentsAreNotBackedUpNorStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	e, d := newBackupEngine(t, &now)
	_, err := e.RunBackups(ctx, now)
	require.NoError(t, err)
	require.NoError(t, e.opts.Store.UpdateDeployment(ctx, d.ID, map[string]any{"state": StateSuspended}))
	d.State = StateSuspended
	now = now.Add(72 * time.Hour)
	queued, err := e.RunBackups(ctx, now)
	require.NoError(t, err)
	require.Empty(t, queued)
	statuses, err := e.BackupStatuses(ctx, d)
	require.NoError(t, err)
	require.False(t, statuses[0].Stale, "a suspended deployment's data does not change")
}

func TestRetentionPrunesOldBuildLogsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UTC()
	e, d := newBackupEngine(t, &now)
	e.opts.BuildLogRetention = time.Hour
	st := e.opts.Store
	old, err := st.CreateBuild(ctx, d.ID)
	require.NoError(t, err)
	_, err = st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: old.ID, Step: "plan", Level: store.LevelInfo, Message: "old"})
	require.NoError(t, err)
	require.NoError(t, st.SetBuildState(ctx, old.ID, store.BuildSucceeded, ""))
	require.NoError(t, e.RunRetention(ctx, time.Now().Add(30*time.Minute)))
	events, err := st.BuildEvents(ctx, old.ID)
	require.NoError(t, err)
	require.Len(t, events, 1, "finished 30 minutes ago, inside the retention")
	require.NoError(t, e.RunRetention(ctx, time.Now().Add(2*time.Hour)))
	events, err = st.BuildEvents(ctx, old.ID)
	require.NoError(t, err)
	require.Empty(t, events, "finished more than an hour before: its log is gone")
	b, err := st.GetBuild(ctx, old.ID)
	require.NoError(t, err)
	require.Equal(t, store.BuildSucceeded, b.State, "the build itself stays")
}

// BenchmarkEngineTick is the scheduler's whole tick over 10,000 active deployments, each
// with an app with data and its backup record, none due: what the database costs on top
// of the policy evaluation (scheduler.BenchmarkTick). Issue 6 asks at most 1 s a tick.
func BenchmarkEngineTick(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: b.TempDir()})
	require.NoError(b, err)
	defer st.Close()
	e := New(Options{Store: st, Clock: func() time.Time { return now }})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(b, err)
	e.SetQueue(q)
	for i := range 10000 {
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: fmt.Sprintf("d%05d", i), State: StateActive, Config: "{}", UpdatePolicy: "automatic"})
		require.NoError(b, err)
		require.NoError(b, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-db", App: "miniflux", Type: contract.PostgreSQL, Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))
		require.NoError(b, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-backups", App: "miniflux", Type: contract.S3, Spec: `{"buckets":{"backups":{"backup":true}}}`, Result: "{}", State: store.ResourceProvisioned}))
		require.NoError(b, st.EnsureAppBackup(ctx, d.ID, "miniflux", now.Add(-time.Hour)))
	}
	b.ResetTimer()
	for b.Loop() {
		require.NoError(b, e.Tick(ctx, now))
	}
}

// A deployment whose last build failed still holds its data: it is backed up, and shows
// stale, as an active one.
func TestFailedDeploymentsAreBackedUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	e, d := newBackupEngine(t, &now)
	require.NoError(t, e.opts.Store.UpdateDeployment(ctx, d.ID, map[string]any{"state": StateFailed}))
	d.State = StateFailed
	_, err := e.RunBackups(ctx, now)
	require.NoError(t, err)
	now = now.Add(40 * time.Hour)
	statuses, err := e.BackupStatuses(ctx, d)
	require.NoError(t, err)
	require.True(t, statuses[0].Stale)
	queued, err := e.RunBackups(ctx, now)
	require.NoError(t, err)
	require.Len(t, queued, 1)
}

// A build that gives an app a database and a backups bucket records its backups then
// (recordBackups), so the tick finds the app by its record; an app the build left without
// a record (a database without a backups bucket yet, or rows written around the builds) is
// found by the sweep, at an engine's first tick and then once an hour, not at every tick.
func TestBackupRecordsFromTheBuildAndTheSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	e, d := newBackupEngine(t, &now)
	st := e.opts.Store
	rows, err := st.Resources(ctx, d.ID)
	require.NoError(t, err)
	byName := map[string]store.Resource{}
	for _, row := range rows {
		byName[row.Name] = row
	}

	// The build: the database alone records nothing, the bucket after it records.
	r := &run{e: e, d: d, rows: map[string]store.Resource{"miniflux-db": byName["miniflux-db"]}}
	require.NoError(t, r.recordBackups(ctx, "miniflux"))
	recs, err := st.AppBackups(ctx, d.ID)
	require.NoError(t, err)
	require.Empty(t, recs, "a database without a backups bucket has nothing to back up to")
	r.rows["miniflux-backups"] = byName["miniflux-backups"]
	require.NoError(t, r.recordBackups(ctx, "miniflux"))
	recs, err = st.AppBackups(ctx, d.ID)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, now, recs[0].Since.UTC(), "the schedule counts from the build")

	// The first tick sweeps; a deployment written after it, with no build, waits for the
	// next sweep.
	_, err = e.RunBackups(ctx, now)
	require.NoError(t, err)
	other, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "other", State: StateActive, Config: "{}"})
	require.NoError(t, err)
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: other.ID, Name: "miniflux-db", App: "miniflux", Type: contract.PostgreSQL, Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: other.ID, Name: "miniflux-backups", App: "miniflux", Type: contract.S3, Spec: `{"buckets":{"backups":{"backup":true}}}`, Result: "{}", State: store.ResourceProvisioned}))
	for _, at := range []time.Time{now.Add(time.Minute), now.Add(RecordSweepInterval - time.Second)} {
		_, err = e.RunBackups(ctx, at)
		require.NoError(t, err)
		recs, err = st.AppBackups(ctx, other.ID)
		require.NoError(t, err)
		require.Empty(t, recs, "no sweep at %s", at)
	}
	swept := now.Add(RecordSweepInterval)
	_, err = e.RunBackups(ctx, swept)
	require.NoError(t, err)
	recs, err = st.AppBackups(ctx, other.ID)
	require.NoError(t, err)
	require.Len(t, recs, 1, "the sweep an hour after the last finds it")
	require.Equal(t, swept, recs[0].Since.UTC())
}
