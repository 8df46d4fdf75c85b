package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const waitFor = 15 * time.Second

// drivers runs test once on SQLite and once on PostgreSQL, each with a
// freshly migrated store.
func drivers(t *testing.T, test func(t *testing.T, st *store.Store)) {
	storetest.Drivers(t, func(t *testing.T, cfg store.Config) { test(t, storetest.Open(t, cfg)) })
}

var namespaces atomic.Int64

func newBuild(t *testing.T, st *store.Store) store.Build {
	t.Helper()
	ctx := context.Background()
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: fmt.Sprintf("d%d", namespaces.Add(1))})
	require.NoError(t, err)
	b, err := st.CreateBuild(ctx, d.ID)
	require.NoError(t, err)
	return b
}

// newQueue returns a queue with River's intervals shortened for tests, and
// stops it at the end of the test, before the store closes.
func newQueue(t *testing.T, st *store.Store, b Builder) *Queue {
	t.Helper()
	return newQueueOf(t, st, Config{Builder: b})
}

// newQueueOf is newQueue of cfg, with the test's workers, logger and intervals.
func newQueueOf(t *testing.T, st *store.Store, cfg Config) *Queue {
	t.Helper()
	cfg.Workers = 2
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.river = func(c *river.Config) {
		c.FetchCooldown = 5 * time.Millisecond
		c.FetchPollInterval = 20 * time.Millisecond
		c.TestOnly = true
	}
	q, err := New(st, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, q.Stop(ctx))
	})
	return q
}

func waitForState(t *testing.T, st *store.Store, id string, want store.BuildState) store.Build {
	t.Helper()
	var b store.Build
	require.Eventually(t, func() bool {
		var err error
		b, err = st.GetBuild(context.Background(), id)
		require.NoError(t, err)
		return b.State == want
	}, waitFor, 10*time.Millisecond, "build %s never became %s", id, want)
	return b
}

func messages(t *testing.T, st *store.Store, id string) []string {
	t.Helper()
	events, err := st.BuildEvents(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, e := range events {
		out = append(out, e.Step+": "+e.Message)
	}
	return out
}

func jobStates(t *testing.T, q *Queue) []rivertype.JobState {
	t.Helper()
	res, err := q.client.JobList(context.Background(), river.NewJobListParams().Kinds("build"))
	require.NoError(t, err)
	var states []rivertype.JobState
	for _, j := range res.Jobs {
		states = append(states, j.State)
	}
	return states
}

func TestBuildSucceeds(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		q := newQueue(t, st, BuilderFunc(func(ctx context.Context, buildID string, log func(step, message string)) error {
			log("provision", "database ready")
			log("render", "node spec ready")
			return nil
		}))
		require.NoError(t, q.Start(ctx))
		b := newBuild(t, st)
		require.NoError(t, q.EnqueueBuild(ctx, b.ID))

		got := waitForState(t, st, b.ID, store.BuildSucceeded)
		require.NotNil(t, got.StartedAt)
		require.NotNil(t, got.FinishedAt)
		require.Equal(t, []string{
			"queue: build started (attempt 1)",
			"provision: database ready",
			"render: node spec ready",
			"queue: build succeeded",
		}, messages(t, st, b.ID))
		require.Eventually(t, func() bool {
			return fmt.Sprint(jobStates(t, q)) == fmt.Sprint([]rivertype.JobState{rivertype.JobStateCompleted})
		}, waitFor, 10*time.Millisecond)
	})
}

func TestBuildFails(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		q := newQueue(t, st, BuilderFunc(func(ctx context.Context, buildID string, log func(step, message string)) error {
			log("provision", "asking for a database")
			return errors.New("postgresql: quota exceeded")
		}))
		require.NoError(t, q.Start(ctx))
		b := newBuild(t, st)
		require.NoError(t, q.EnqueueBuild(ctx, b.ID))

		got := waitForState(t, st, b.ID, store.BuildFailed)
		require.Equal(t, "postgresql: quota exceeded", got.Reason)
		require.Equal(t, []string{
			"queue: build started (attempt 1)",
			"provision: asking for a database",
			"queue: build failed: postgresql: quota exceeded",
		}, messages(t, st, b.ID))
	})
}

func TestBuilderPanicFailsBuild(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		q := newQueue(t, st, BuilderFunc(func(context.Context, string, func(step, message string)) error {
			panic("nil map")
		}))
		require.NoError(t, q.Start(ctx))
		b := newBuild(t, st)
		require.NoError(t, q.EnqueueBuild(ctx, b.ID))

		got := waitForState(t, st, b.ID, store.BuildFailed)
		require.Equal(t, "builder panicked: nil map", got.Reason)
	})
}

func TestStopWaitsForRunningBuild(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		started, finish := make(chan struct{}), make(chan struct{})
		q := newQueue(t, st, BuilderFunc(func(ctx context.Context, buildID string, log func(step, message string)) error {
			close(started)
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
		require.NoError(t, q.Start(ctx))
		b := newBuild(t, st)
		require.NoError(t, q.EnqueueBuild(ctx, b.ID))
		<-started

		stopped := make(chan error, 1)
		go func() {
			stopCtx, cancel := context.WithTimeout(ctx, waitFor)
			defer cancel()
			stopped <- q.Stop(stopCtx)
		}()
		require.Never(t, func() bool { return len(stopped) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
			"Stop returned while a build was running")
		close(finish)
		select {
		case err := <-stopped:
			require.NoError(t, err)
		case <-time.After(waitFor):
			t.Fatal("Stop did not return after the build finished")
		}
		got, err := st.GetBuild(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, store.BuildSucceeded, got.State)
		require.Equal(t, []rivertype.JobState{rivertype.JobStateCompleted}, jobStates(t, q))
	})
}

func TestStopReleasesBlockedBuild(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		started := make(chan struct{})
		q := newQueue(t, st, BuilderFunc(func(ctx context.Context, buildID string, log func(step, message string)) error {
			log("provision", "waiting for a certificate")
			close(started)
			<-ctx.Done()
			return fmt.Errorf("waiting for a certificate: %w", ctx.Err())
		}))
		require.NoError(t, q.Start(ctx))
		b := newBuild(t, st)
		require.NoError(t, q.EnqueueBuild(ctx, b.ID))
		<-started

		stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		require.NoError(t, q.Stop(stopCtx))

		got, err := st.GetBuild(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, store.BuildQueued, got.State)
		require.Equal(t, releasedReason, got.Reason)
		require.Nil(t, got.StartedAt)
		require.Equal(t, []rivertype.JobState{rivertype.JobStateAvailable}, jobStates(t, q))

		// The next fedhost on the database resumes the build.
		next := newQueue(t, st, BuilderFunc(func(ctx context.Context, buildID string, log func(step, message string)) error {
			log("provision", "certificate issued")
			return nil
		}))
		require.NoError(t, next.Start(ctx))
		waitForState(t, st, b.ID, store.BuildSucceeded)
		require.Equal(t, []string{
			"queue: build started (attempt 1)",
			"provision: waiting for a certificate",
			"queue: " + releasedReason,
			"queue: build started (attempt 1)",
			"provision: certificate issued",
			"queue: build succeeded",
		}, messages(t, st, b.ID))
	})
}

func TestEnqueueOneBuildPerDeployment(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		// Not started: the jobs stay queued.
		q := newQueue(t, st, BuilderFunc(func(context.Context, string, func(step, message string)) error { return nil }))

		first := newBuild(t, st)
		require.NoError(t, q.EnqueueBuild(ctx, first.ID))
		require.NoError(t, q.EnqueueBuild(ctx, first.ID), "enqueueing the same build again is harmless")

		_, err := st.CreateBuild(ctx, first.DeploymentID)
		require.ErrorIs(t, err, store.ErrConflict, "the store keeps one unfinished build per deployment")

		require.NoError(t, q.EnqueueBuild(ctx, newBuild(t, st).ID), "another deployment builds independently")
		require.ErrorIs(t, q.EnqueueBuild(ctx, "no-such-build"), store.ErrNotFound)

		finished := newBuild(t, st)
		require.NoError(t, st.SetBuildState(ctx, finished.ID, store.BuildCanceled, "superseded"))
		require.ErrorIs(t, q.EnqueueBuild(ctx, finished.ID), store.ErrBuildFinished)
		require.Len(t, jobStates(t, q), 2)
	})
}
