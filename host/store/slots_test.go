package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// The slots of scheduled jobs on both databases: a scheduled backup's slot is taken with
// its build, a scheduled run's with its run, each at most once, even after the build
// failed; another app, schedule or time is another slot; two submits at once take one;
// old slots are pruned.
func TestScheduleSlots(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}"})
		require.NoError(t, err)
		at := time.Date(2026, 5, 5, 3, 30, 0, 0, time.FixedZone("CEST", 2*3600))

		backup := func(app string, at time.Time) (store.Build, error) {
			return st.SubmitBuild(ctx, d.ID, store.OperationBackup, store.Submission{Config: `{"app":"` + app + `"}`, Backup: &store.Slot{Name: app, At: at}})
		}
		b, err := backup("miniflux", at)
		require.NoError(t, err)
		require.NoError(t, st.SetBuildState(ctx, b.ID, store.BuildFailed, "lost"))
		_, err = backup("miniflux", at.UTC())
		require.ErrorIs(t, err, store.ErrSlotTaken, "the same time, in another zone, is the same slot; its build failing does not free it")
		builds, err := st.ListBuilds(ctx, d.ID, 0)
		require.NoError(t, err)
		require.Len(t, builds, 1, "a taken slot stores no build")

		b2, err := backup("wiki", at)
		require.NoError(t, err, "another app is another slot")
		require.NoError(t, st.SetBuildState(ctx, b2.ID, store.BuildSucceeded, ""))
		b3, err := backup("miniflux", at.Add(24*time.Hour))
		require.NoError(t, err, "the next time is the next slot")
		require.NoError(t, st.SetBuildState(ctx, b3.ID, store.BuildSucceeded, ""))
		_, err = st.SubmitBuild(ctx, "nope", store.OperationBackup, store.Submission{Config: "{}", Backup: &store.Slot{Name: "miniflux", At: at}})
		require.ErrorIs(t, err, store.ErrNotFound)

		// Four at once: one slot, one build; the others are told the slot is taken (the
		// slot comes first in the transaction), and no second build is stored.
		next := at.Add(48 * time.Hour)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { _, errs[i] = backup("miniflux", next) })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.ErrorIs(t, err, store.ErrSlotTaken)
		}
		require.Equal(t, 1, ok)

		slots, err := st.ScheduleSlots(ctx, d.ID, store.SlotBackup)
		require.NoError(t, err)
		require.Len(t, slots, 4)
		require.True(t, slots[0].ScheduledAt.Equal(at))
		require.Equal(t, b.ID, slots[0].JobID)

		// A scheduled run: its slot, its run and the schedule's last run in one go.
		sc, err := st.CreateRunSchedule(ctx, store.RunSchedule{DeploymentID: d.ID, App: "miniflux", Operation: "refresh-feeds", Cron: "30 3 * * *", Input: "{}", Actor: "alice", NextAt: at})
		require.NoError(t, err)
		ran := at.Add(time.Minute)
		newRun := store.Run{DeploymentID: d.ID, App: "miniflux", Operation: "refresh-feeds", Actor: "scheduler", Trigger: store.RunScheduled, Input: "{}"}
		r, err := st.CreateScheduledRun(ctx, newRun, sc.ID, at, ran)
		require.NoError(t, err)
		require.Equal(t, store.RunQueued, r.State)
		_, err = st.CreateScheduledRun(ctx, newRun, sc.ID, at, ran.Add(time.Minute))
		require.ErrorIs(t, err, store.ErrSlotTaken)
		runs, err := st.ListRuns(ctx, d.ID, 10)
		require.NoError(t, err)
		require.Len(t, runs, 1, "a taken slot stores no run")
		list, err := st.RunSchedules(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, r.ID, list[0].LastRunID)
		require.True(t, ran.Equal(*list[0].LastAt), "last at %s", list[0].LastAt)
		_, err = st.CreateScheduledRun(ctx, newRun, sc.ID, at.Add(24*time.Hour), ran.Add(24*time.Hour))
		require.NoError(t, err, "the next time is the next slot")

		// Pruning: what was scheduled before the time goes, but each job's newest slot,
		// while its schedule exists.
		n, err := st.PruneScheduleSlots(ctx, at.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 2, n, "miniflux's backup and the run at the first time; wiki's only slot stays")
		slots, err = st.ScheduleSlots(ctx, d.ID, store.SlotBackup)
		require.NoError(t, err)
		require.Len(t, slots, 3)
		_, err = backup("wiki", at)
		require.ErrorIs(t, err, store.ErrSlotTaken, "a job's newest slot is kept, however old")
		n, err = st.PruneScheduleSlots(ctx, next.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "miniflux's second day")
		slots, err = st.ScheduleSlots(ctx, d.ID, store.SlotRun)
		require.NoError(t, err)
		require.Len(t, slots, 1)
		require.NoError(t, st.DeleteRunSchedule(ctx, d.ID, sc.ID))
		n, err = st.PruneScheduleSlots(ctx, next.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the slot of a schedule removed goes")
		slots, err = st.ScheduleSlots(ctx, d.ID, store.SlotRun)
		require.NoError(t, err)
		require.Empty(t, slots)
	})
}
