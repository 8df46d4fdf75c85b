package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/fedhost/fedhost/host/store"
)

// Runner runs one run of an app's operation in River job jobID: it renders the command,
// starts the run with store.StartRun and records its end with store.FinishRun. It
// returns an error wrapping store.ErrNodeBusy when another run holds the node, and the
// run waits.
type Runner interface {
	RunOperation(ctx context.Context, runID string, jobID int64) error
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, runID string, jobID int64) error

// RunOperation calls f.
func (f RunnerFunc) RunOperation(ctx context.Context, runID string, jobID int64) error {
	return f(ctx, runID, jobID)
}

// runsQueue is the River queue of runs: a long build does not hold a run up.
const runsQueue = "runs"

// A run is a person waiting at a Run button: its queue fetches far more often than
// River's defaults (100 ms cooldown, 1 s poll), which put 100 ms to 1 s between a submit
// and the command's start. See docs/benchmarks.md (runs queue overhead).
const (
	runFetchCooldown = 5 * time.Millisecond
	runFetchPoll     = 20 * time.Millisecond
)

// busyWait is how long a run waits for its node when another run holds it.
const busyWait = 500 * time.Millisecond

// runArgs are the arguments of a "run" job; the run row is the source of truth.
type runArgs struct {
	RunID string `json:"run_id" river:"unique"`
}

func (runArgs) Kind() string { return "run" }

func (runArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: runsQueue, UniqueOpts: river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled,
		},
	}}
}

type runWorker struct {
	river.WorkerDefaults[runArgs]
	runner Runner
	logger *slog.Logger
}

func (w *runWorker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	if w.runner == nil {
		return river.JobCancel(errors.New("this fedhost process runs no operations"))
	}
	err := w.runner.RunOperation(ctx, job.Args.RunID, job.ID)
	switch {
	case errors.Is(err, store.ErrNodeBusy):
		return river.JobSnooze(busyWait)
	case errors.Is(err, store.ErrNotFound):
		return river.JobCancel(err)
	case err != nil:
		// The run's verdict is the runner's to record; an error here is one recording it.
		w.logger.Error("queue: a run could not be recorded", "run_id", job.Args.RunID, "error", err)
		return err
	}
	return nil
}

// Timeout lets the runner's own timeout (the operation's) bound a run.
func (w *runWorker) Timeout(*river.Job[runArgs]) time.Duration { return -1 }

// EnqueueRun queues a stored run of a deployment whose nodes run on nodeHost (its
// store.Deployment.NodeHost): a run of a deployment on `local` nodes goes to that host's
// own runs queue, as its builds do; with nodeHost empty, to the runs queue any host works.
// The run learns its job when it starts (StartRun): one write less between a submit and
// the command's start.
func (q *Queue) EnqueueRun(ctx context.Context, runID, nodeHost string) error {
	var opts *river.InsertOpts
	if nodeHost != "" {
		opts = &river.InsertOpts{Queue: hostRunsQueue(nodeHost)}
	}
	if _, err := q.client.Insert(ctx, runArgs{RunID: runID}, opts); err != nil {
		return fmt.Errorf("enqueueing run %s: %w", runID, err)
	}
	return nil
}

// CancelRun cancels a queued or running run: a queued one at once, a running one when
// its worker sees the cancellation (River cancels its context, and the command is
// killed).
func (q *Queue) CancelRun(ctx context.Context, runID, actor string) error {
	// A queued run is canceled in the store; its job then finds it finished and ends.
	err := q.store.CancelQueuedRun(ctx, runID, "canceled by "+actor+" before it ran")
	if !errors.Is(err, store.ErrBuildFinished) {
		return err
	}
	r, err := q.store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if r.State.Finished() {
		return fmt.Errorf("run %s is already %s: %w", runID, r.State, store.ErrBuildFinished)
	}
	if _, err := q.client.JobCancel(ctx, r.JobID); err != nil {
		return fmt.Errorf("canceling run %s: %w", runID, err)
	}
	return nil
}

var _ river.Worker[runArgs] = (*runWorker)(nil)
