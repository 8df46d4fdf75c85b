package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
	"github.com/fedhost/fedhost/sdk/contract"
)

// tickTogether runs the ticks of engines at now at once, as an old leader still running
// its tick while a new leader starts its own.
func tickTogether(t *testing.T, now time.Time, engines ...*Engine) {
	t.Helper()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, len(engines))
	for i, e := range engines {
		wg.Go(func() {
			<-start
			errs[i] = e.Tick(context.Background(), now)
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// waitBuilds waits until no build of st is queued or running.
func waitBuilds(t *testing.T, st *store.Store) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := st.CountUnfinishedBuilds(context.Background())
		return err == nil && n == 0
	}, 30*time.Second, 20*time.Millisecond)
}

// Two hosts on one PostgreSQL, each with its engine, its store and its River client, tick
// at the same due times: each scheduled backup is submitted once. Their builds fail before
// the backup begins (as a build lost with its host would): the schedule still counts from
// the last attempt recorded, so both hosts find the backup due again at every tick, and
// the slot, taken with the failed build, is what keeps it from being submitted again for
// that time. The next scheduled time is the next slot, once.
func TestScheduledBackupsOnceAcrossAHandover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	first := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	var clock = first
	engine := func(clientID string) (*Engine, *store.Store) {
		st := storetest.Open(t, store.Config{Database: dsn})
		e := New(Options{Store: st, Clock: func() time.Time { return clock },
			BackupPolicy: func(string) BackupPolicy {
				return BackupPolicy{Schedule: "30 3 * * *", KeepWithin: 30 * 24 * time.Hour}
			}})
		q, err := queue.New(st, queue.Config{ClientID: clientID, Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error {
			return errors.New("the host running the build was lost")
		})})
		require.NoError(t, err)
		e.SetQueue(q)
		require.NoError(t, q.Start(ctx))
		t.Cleanup(func() { _ = q.Stop(context.Background()) })
		return e, st
	}
	old, st := engine("host-old")
	leader, _ := engine("host-new")

	const deployments = 6
	var ids []string
	for i := range deployments {
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: fmt.Sprintf("acme%d", i), State: StateActive, Config: "{}"})
		require.NoError(t, err)
		for _, app := range []string{"miniflux", "wiki"} {
			require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: app + "-db", App: app, Type: contract.PostgreSQL, Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))
			require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: app + "-backups", App: app, Type: contract.S3, Spec: `{"buckets":{"backups":{"backup":true}}}`, Result: "{}", State: store.ResourceProvisioned}))
			require.NoError(t, st.EnsureAppBackup(ctx, d.ID, app, first))
		}
		ids = append(ids, d.ID)
	}
	backups := func() map[string][]store.Build {
		out := map[string][]store.Build{}
		for _, id := range ids {
			bs, err := st.ListBuilds(ctx, id, 0)
			require.NoError(t, err)
			out[id] = slices.DeleteFunc(bs, func(b store.Build) bool { return b.Operation != store.OperationBackup })
		}
		return out
	}

	// Due at 03:30: both hosts tick at once, minute after minute, and after each tick the
	// builds fail. A deployment runs one build at a time: its second app's backup comes at
	// a later tick, and is submitted once too.
	due := time.Date(2026, 5, 5, 3, 30, 0, 0, time.UTC)
	for minute := 1; minute <= 6; minute++ {
		tickTogether(t, due.Add(time.Duration(minute)*time.Minute), old, leader)
		waitBuilds(t, st)
	}
	for id, bs := range backups() {
		require.Len(t, bs, 2, "deployment %s: one backup of each app, not one a tick", id)
		for _, b := range bs {
			require.Equal(t, store.BuildFailed, b.State)
		}
		slots, err := st.ScheduleSlots(ctx, id, store.SlotBackup)
		require.NoError(t, err)
		require.Len(t, slots, 2)
		for _, s := range slots {
			require.True(t, due.Equal(s.ScheduledAt), "slot at %s", s.ScheduledAt)
		}
	}

	// The old leader ends, the new one goes on: still nothing for 03:30 that day.
	tickTogether(t, due.Add(3*time.Hour), leader)
	waitBuilds(t, st)
	for _, bs := range backups() {
		require.Len(t, bs, 2, "a lost backup is not repeated for the same time")
	}

	// The next day's 03:30 is the next slot: taken once, by whichever ticks first.
	next := due.Add(24 * time.Hour)
	for minute := 1; minute <= 4; minute++ {
		tickTogether(t, next.Add(time.Duration(minute)*time.Minute), old, leader)
		waitBuilds(t, st)
	}
	for id, bs := range backups() {
		require.Len(t, bs, 4, "deployment %s: one more backup of each app", id)
	}

	// Retention keeps the slots a week after their time.
	require.NoError(t, leader.RunRetention(ctx, next.Add(store.SlotsKept)))
	slots, err := st.ScheduleSlots(ctx, ids[0], store.SlotBackup)
	require.NoError(t, err)
	require.Len(t, slots, 2, "the first day's slots are gone, the next day's stay")
	require.True(t, next.Equal(slots[0].ScheduledAt))
}

// Two hosts on one PostgreSQL tick at the same due times of the schedules of an app's
// operations: each scheduled run is queued once, its slot taken with it.
func TestScheduledRunsOnceAcrossAHandover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := store.Config{Database: pgtest.DSN(t)}
	b := setupRunsOn(t, cfg, "host-old")

	// The second host: its store, its engine on the same plugins, its River client.
	st2 := storetest.Open(t, cfg)
	opts := b.e.opts
	opts.Store, opts.Audit = st2, audit.New(st2, audit.Options{})
	leader := New(opts)
	q, err := queue.New(st2, queue.Config{ClientID: "host-new", Runner: leader,
		Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	leader.SetQueue(q)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })

	at := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	b.clock.Add(at.Sub(b.clock.Now()))
	var schedules []store.RunSchedule
	for _, req := range []ScheduleRequest{
		{App: "opsapp", Operation: "token", Cron: "30 9 * * *", Actor: "alice"},
		{App: "opsapp", Operation: "flood", Cron: "30 9 * * *", Actor: "alice"},
		{App: "opsapp", Operation: "token", Cron: "*/5 * * * *", Actor: "bob"},
	} {
		sc, err := b.e.AddSchedule(ctx, b.d.ID, req)
		require.NoError(t, err)
		schedules = append(schedules, sc)
	}
	scheduled := func() map[string]int {
		runs, err := b.st.ListRuns(ctx, b.d.ID, 1000)
		require.NoError(t, err)
		byOp := map[string]int{}
		for _, r := range runs {
			if r.Trigger == store.RunScheduled {
				byOp[r.Operation]++
			}
		}
		return byOp
	}

	// 09:31 to 09:34: the two daily schedules are due once; the one every five minutes
	// too (its 08:05 to 09:30 times missed, run once).
	due := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	for minute := 1; minute <= 4; minute++ {
		tickTogether(t, due.Add(time.Duration(minute)*time.Minute), b.e, leader)
	}
	require.Equal(t, map[string]int{"token": 2, "flood": 1}, scheduled())
	// 09:35 and after: the five-minute schedule's next times, once each.
	for minute := 5; minute <= 11; minute++ {
		tickTogether(t, due.Add(time.Duration(minute)*time.Minute), b.e, leader)
	}
	require.Equal(t, map[string]int{"token": 2 + 2, "flood": 1}, scheduled(), "09:35 and 09:40")

	for _, sc := range schedules {
		list, err := b.st.RunSchedules(ctx, b.d.ID)
		require.NoError(t, err)
		i := slices.IndexFunc(list, func(s store.RunSchedule) bool { return s.ID == sc.ID })
		require.NotEmpty(t, list[i].LastRunID)
	}
	slots, err := b.st.ScheduleSlots(ctx, b.d.ID, store.SlotRun)
	require.NoError(t, err)
	require.Len(t, slots, 5)

	// The claim of a schedule's time (moving its next time) and the queueing of its run
	// are two steps: a host that claimed and then queued late, after another, is refused
	// by the slot all the same.
	require.True(t, due.Equal(schedules[0].NextAt))
	_, err = b.e.StartRun(ctx, b.d.ID, RunRequest{App: "opsapp", Operation: "token", Actor: "scheduler", Trigger: store.RunScheduled,
		schedule: &scheduledRun{id: schedules[0].ID, at: schedules[0].NextAt, ranAt: due.Add(time.Minute)}})
	require.ErrorIs(t, err, store.ErrSlotTaken)
	require.Equal(t, map[string]int{"token": 4, "flood": 1}, scheduled())
	runs, err := b.st.ListRuns(ctx, b.d.ID, 1000)
	require.NoError(t, err)
	for _, r := range runs {
		b.wait(t, r.ID, finished)
	}
}
