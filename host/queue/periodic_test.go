package queue

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

func TestPeriodicJobRunsOnStartWithTheInjectedClock(t *testing.T) {
	drivers(t, func(t *testing.T, st *store.Store) {
		at := time.Date(2026, 3, 1, 4, 30, 0, 0, time.UTC)
		seen := make(chan time.Time, 16)
		var failures atomic.Int64
		q, err := New(st, Config{
			Builder: BuilderFunc(func(context.Context, string, func(string, string)) error { return nil }),
			Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
			Clock:   func() time.Time { return at },
			Periodic: []Periodic{
				{ID: "tick", Schedule: "@every 1s", Run: func(_ context.Context, now time.Time) error { seen <- now; return nil }},
				{ID: "fails", Schedule: "@daily", Run: func(context.Context, time.Time) error {
					failures.Add(1)
					return errors.New("no")
				}},
			},
			river: func(c *river.Config) {
				c.FetchCooldown = 5 * time.Millisecond
				c.FetchPollInterval = 20 * time.Millisecond
				c.TestOnly = true
			},
		})
		require.NoError(t, err)
		require.NoError(t, q.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			require.NoError(t, q.Stop(ctx))
		})
		// The elected leader inserts the job at once (RunOnStart), then every second.
		for range 2 {
			select {
			case now := <-seen:
				require.Equal(t, at, now, "the job is told the injected clock's time")
			case <-time.After(waitFor):
				t.Fatal("the periodic job did not run")
			}
		}
		// A failing run is not retried: the next one is due on its schedule (@daily).
		time.Sleep(time.Second)
		require.EqualValues(t, 1, failures.Load())
	})
}

func TestPeriodicJobScheduleIsChecked(t *testing.T) {
	st, err := store.Open(context.Background(), store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	defer st.Close()
	_, err = New(st, Config{
		Builder:  BuilderFunc(func(context.Context, string, func(string, string)) error { return nil }),
		Periodic: []Periodic{{ID: "tick", Schedule: "every minute", Run: func(context.Context, time.Time) error { return nil }}},
	})
	require.ErrorContains(t, err, `periodic job tick: schedule "every minute"`)
}

// A periodic job running when its process was killed would block its next runs until
// River's rescuer took it back an hour later; FailLost at start cancels it, and only the
// jobs this process (its client ID) left running: another host's are its own.
func TestFailLostCancelsOnlyThisProcesssJobs(t *testing.T) {
	drivers(t, func(t *testing.T, st *store.Store) {
		q, err := New(st, Config{
			ClientID: "fedhost-a",
			Builder:  BuilderFunc(func(context.Context, string, func(string, string)) error { return nil }),
			Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
			Periodic: []Periodic{
				{ID: "tick", Schedule: "@every 1s", Run: func(context.Context, time.Time) error { return nil }},
				{ID: "retention", Schedule: "@hourly", Run: func(context.Context, time.Time) error { return nil }},
			},
		})
		require.NoError(t, err)
		ctx := context.Background()
		running := func(id int64, by string) {
			t.Helper()
			var err error
			if st.RiverPgx() != nil {
				_, err = st.RiverPgx().Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_by = ARRAY[$2::text] WHERE id = $1`, id, by)
			} else {
				_, err = st.RiverSQLite().ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_by = jsonb(json_array(?)) WHERE id = ?`, by, id)
			}
			require.NoError(t, err)
		}
		mine, err := q.client.Insert(ctx, periodicArgs{ID: "tick"}, nil)
		require.NoError(t, err)
		running(mine.Job.ID, "fedhost-a")
		theirs, err := q.client.Insert(ctx, periodicArgs{ID: "retention"}, nil)
		require.NoError(t, err)
		running(theirs.Job.ID, "fedhost-b")
		again, err := q.client.Insert(ctx, periodicArgs{ID: "tick"}, nil)
		require.NoError(t, err)
		require.True(t, again.UniqueSkippedAsDuplicate, "one tick at a time: the running one blocks the next")

		ids, err := q.FailLost(ctx)
		require.NoError(t, err)
		require.Empty(t, ids, "no build was lost")
		again, err = q.client.Insert(ctx, periodicArgs{ID: "tick"}, nil)
		require.NoError(t, err)
		require.False(t, again.UniqueSkippedAsDuplicate, "the next tick may be queued again")
		again, err = q.client.Insert(ctx, periodicArgs{ID: "retention"}, nil)
		require.NoError(t, err)
		require.True(t, again.UniqueSkippedAsDuplicate, "another host's running job is left alone")
	})
}
