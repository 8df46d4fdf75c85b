package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/fedhost/fedhost/host/store"
)

// buildArgs are the arguments of a "build" job; the build row is the source of truth.
// One build per deployment at a time is the store's rule (a unique index on unfinished
// builds), not River's: a job lingers as running for a moment after its build finished,
// and the next build of the deployment must not wait for that.
type buildArgs struct {
	BuildID      string `json:"build_id" river:"unique"`
	DeploymentID string `json:"deployment_id"`
	// HandedOverBy is the host that handed the build over to its node host's queue: the
	// handed-over job is another job than the one still running there.
	HandedOverBy string `json:"handed_over_by,omitempty" river:"unique"`
}

func (buildArgs) Kind() string { return "build" }

// InsertOpts keeps at most one unfinished job per build.
func (buildArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{
			rivertype.JobStateAvailable,
			rivertype.JobStatePending,
			rivertype.JobStateRetryable,
			rivertype.JobStateRunning,
			rivertype.JobStateScheduled,
		},
	}}
}

// buildWorker runs a build job, keeping the build row and its log up to date.
// A builder error is the build's verdict (failed), not a job error: the job is
// retried only when recording the verdict itself fails.
type buildWorker struct {
	river.WorkerDefaults[buildArgs]
	store    *store.Store
	builder  Builder
	logger   *slog.Logger
	finished func(operation string, state store.BuildState, took time.Duration)
	// clientID and localNodes: this host's River client ID, and whether its instance
	// provider is `local` (Config.LocalNodes).
	clientID   string
	localNodes bool
	// handOver queues a build again, in its deployment's node host's queue.
	handOver func(ctx context.Context, args buildArgs, owner string) error
}

// releasedReason is the reason of a build put back in the queue by a stop.
const releasedReason = "released: fedhost stopped while the build ran; it resumes on the next start"

func (w *buildWorker) Work(ctx context.Context, job *river.Job[buildArgs]) error {
	id := job.Args.BuildID
	err := w.store.SetBuildState(ctx, id, store.BuildRunning, "")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return river.JobCancel(err)
	case errors.Is(err, store.ErrBuildFinished):
		return nil // an earlier run finished it but stopped before its job completed
	case err != nil:
		return err
	}

	// Writes outlive a cancelled ctx: what happens while stopping must be recorded.
	bg := context.WithoutCancel(ctx)
	event := func(level, step, message string, progress int) {
		e := store.BuildEvent{BuildID: id, Step: step, Level: level, Message: message, Progress: progress}
		if _, err := w.store.AppendBuildEvent(bg, e); err != nil {
			w.logger.Error("queue: recording a build event", "build_id", id, "error", err)
		}
	}
	event(store.LevelInfo, "queue", fmt.Sprintf("build started (attempt %d)", job.Attempt), 0)
	started := time.Now()
	buildErr, owner, err := w.elsewhere(ctx, job.Args.DeploymentID)
	if err != nil {
		return err
	}
	if buildErr != nil && w.handOver != nil {
		// A job queued before its deployment's nodes were claimed (a retry of the first
		// build after a crash or a database outage) goes on to the host that holds them.
		event(store.LevelInfo, "queue", "handed over to "+owner+", which runs this deployment's local nodes", 0)
		if err := w.store.SetBuildState(bg, id, store.BuildQueued, ""); err != nil {
			return err
		}
		err := w.handOver(bg, buildArgs{BuildID: id, DeploymentID: job.Args.DeploymentID, HandedOverBy: w.clientID}, owner)
		if err == nil {
			return nil
		}
		w.logger.Error("queue: handing a build over to its node host", "build_id", id, "error", err)
	}
	if buildErr == nil {
		buildErr = w.run(ctx, id, func(step, message string) { event(store.LevelInfo, step, message, 0) })
	}

	var state store.BuildState
	var reason string
	switch {
	case buildErr == nil:
		state = store.BuildSucceeded
		event(store.LevelInfo, "queue", "build succeeded", 100)
	case errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely):
		state, reason = store.BuildCanceled, "canceled"
		event(store.LevelWarn, "queue", "build canceled", 0)
	case errors.Is(ctx.Err(), context.Canceled):
		// The client is stopping. Returning ctx's error makes River put the
		// job back as available without counting the attempt.
		event(store.LevelWarn, "queue", releasedReason, 0)
		if err := w.store.SetBuildState(bg, id, store.BuildQueued, releasedReason); err != nil {
			w.logger.Error("queue: releasing a build", "build_id", id, "error", err)
		}
		return fmt.Errorf("build %s released: %w", id, ctx.Err())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		state, reason = store.BuildFailed, fmt.Sprintf("build did not finish within %s", buildTimeout)
		event(store.LevelError, "queue", reason, 0)
	default:
		state, reason = store.BuildFailed, buildErr.Error()
		event(store.LevelError, "queue", "build failed: "+reason, 0)
	}
	err = w.store.SetBuildState(bg, id, state, reason)
	if errors.Is(err, store.ErrBuildFinished) {
		return nil // another verdict came first (failed as lost): it is not this run's to count
	}
	if err != nil {
		return err
	}
	if w.finished != nil {
		took := time.Since(started)
		if b, err := w.store.GetBuild(bg, id); err != nil {
			w.logger.Error("queue: reading a finished build", "build_id", id, "error", err)
		} else {
			w.finished(b.Operation, state, took)
		}
	}
	return nil
}

// elsewhere claims the deployment's nodes for this host when its instance provider is
// `local`, and returns the build's error when another host holds them: nodes of the
// `local` provider exist only on the host that started them. EnqueueBuild sends the
// builds of a claimed deployment to its host's queue, so this happens only to a job
// queued before the claim (a retry) or on hosts configured differently; Work then hands
// the build over to the owner's queue.
func (w *buildWorker) elsewhere(ctx context.Context, deploymentID string) (buildErr error, owner string, err error) {
	if !w.localNodes {
		return nil, "", nil
	}
	owner, err = w.store.ClaimNodeHost(ctx, deploymentID, w.clientID)
	if err != nil {
		return nil, "", err
	}
	if owner != w.clientID {
		return fmt.Errorf("this deployment's local nodes run on %s, not on %s, where this build was picked up: submit again, and it runs there", owner, w.clientID), owner, nil
	}
	return nil, owner, nil
}

// run calls the builder, turning a panic into the build's error: the build
// fails instead of River retrying a job that would panic again.
func (w *buildWorker) run(ctx context.Context, id string, log func(step, message string)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.logger.Error("queue: builder panicked", "build_id", id, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("builder panicked: %v", r)
		}
	}()
	return w.builder.Build(ctx, id, log)
}

var _ river.Worker[buildArgs] = (*buildWorker)(nil)
