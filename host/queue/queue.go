// Package queue runs builds as River jobs on the store's database, SQLite or
// PostgreSQL. Builds survive restarts: a build interrupted by a stop is put
// back in the queue and resumed by the next fedhost to start on the database.
package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/fedhost/fedhost/host/store"
)

// Builder runs one build. It reports progress through log, and must return
// soon after ctx ends: the build is then released back to the queue and run
// again later, so every step must be idempotent.
type Builder interface {
	Build(ctx context.Context, buildID string, log func(step, message string)) error
}

// BuilderFunc adapts a function to Builder.
type BuilderFunc func(ctx context.Context, buildID string, log func(step, message string)) error

// Build calls f.
func (f BuilderFunc) Build(ctx context.Context, buildID string, log func(step, message string)) error {
	return f(ctx, buildID, log)
}

// Config configures a Queue.
type Config struct {
	// Workers is how many builds this process runs at once; 4 if zero.
	Workers int
	// Builder runs the builds. Required.
	Builder Builder
	// Logger receives the queue's and River's logs; slog.Default() if nil.
	Logger *slog.Logger

	// ClientID names this process among those working the database (River's client ID):
	// unique among the processes running at once, and the same again when this one
	// restarts, so that FailLost fails only the builds it left running itself. Empty:
	// a random ID, and FailLost fails every running build.
	ClientID string
	// Runner runs the runs of apps' operations; without it, runs are queued and this
	// process works none.
	Runner Runner
	// RunWorkers is how many runs this process runs at once; 4 if zero.
	RunWorkers int
	// LocalNodes says this host's instance provider is `local`: a deployment's first build
	// run here records this host as its node host, and its later builds go to this host's
	// own queue, which only this host works (docs/architecture.md). Needs ClientID.
	LocalNodes bool
	// Periodic is the work run on schedules, by the leader only (see Periodic).
	Periodic []Periodic
	// Clock tells the periodic jobs the time; time.Now if nil. Tests inject one.
	Clock func() time.Time
	// Finished, when set, is told of every build this process ran to its verdict:
	// its operation, final state and how long it ran.
	Finished func(operation string, state store.BuildState, took time.Duration)
	// Lost, when set, is told of the builds the leader failed as lost with a host not
	// seen lately (in cluster mode), after they are failed; FailLost returns those this
	// process left running to its caller instead.
	Lost func(ctx context.Context, buildIDs []string)

	// river adjusts River's configuration; tests shorten its intervals.
	river func(*river.Config)
}

// buildTimeout bounds one run of a build. River rescues a job left running by
// a crashed process only after this (plus a margin), so it is also how long
// such a build waits to be resumed.
const buildTimeout = time.Hour

// riverClient is what the queue uses of a River client, whichever its driver.
type riverClient interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	StopAndCancel(ctx context.Context) error
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
	JobCancel(ctx context.Context, jobID int64) (*rivertype.JobRow, error)
}

// Queue enqueues builds and works them.
type Queue struct {
	store    *store.Store
	client   riverClient
	logger   *slog.Logger
	clientID string
	beats    beats
	lost     func(ctx context.Context, buildIDs []string)
}

// New returns a queue on st's database. It works nothing until Start.
func New(st *store.Store, cfg Config) (*Queue, error) {
	if cfg.Builder == nil {
		return nil, errors.New("queue: Config.Builder is required")
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("queue: Config.Workers is %d: use a positive number, or 0 for the default", cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	if cfg.LocalNodes && cfg.ClientID == "" {
		return nil, errors.New("queue: Config.LocalNodes needs a ClientID: the host's queue is named by it")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	q := &Queue{store: st, logger: cfg.Logger, clientID: cfg.ClientID, lost: cfg.Lost}

	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &buildWorker{store: st, builder: cfg.Builder, logger: cfg.Logger, finished: cfg.Finished,
		clientID: cfg.ClientID, localNodes: cfg.LocalNodes, handOver: q.handOver}); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	queues := map[string]river.QueueConfig{
		river.QueueDefault: {MaxWorkers: cfg.Workers},
		// The scheduler's jobs have their own worker: long builds do not hold them up.
		periodicQueue: {MaxWorkers: 1},
	}
	if cfg.RunWorkers <= 0 {
		cfg.RunWorkers = 4
	}
	// Registered even without a runner: River inserts only the kinds it knows.
	if err := river.AddWorkerSafely(workers, &runWorker{runner: cfg.Runner, logger: cfg.Logger}); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	if cfg.Runner != nil {
		queues[runsQueue] = river.QueueConfig{MaxWorkers: cfg.RunWorkers, FetchCooldown: runFetchCooldown, FetchPollInterval: runFetchPoll}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	jobs := cfg.Periodic
	if q.clusterMode() {
		jobs = append(jobs[:len(jobs):len(jobs)], Periodic{ID: lostCheckID, Schedule: lostCheckEvery, Run: q.failDeadHosts})
	}
	periodic, periodicRiver, err := periodicJobs(jobs)
	if err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &periodicWorker{jobs: periodic, clock: cfg.Clock, logger: cfg.Logger}); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	rcfg := &river.Config{
		ID:                   cfg.ClientID,
		PeriodicJobs:         periodicRiver,
		Logger:               cfg.Logger,
		Queues:               queues,
		Workers:              workers,
		JobTimeout:           buildTimeout,
		RescueStuckJobsAfter: buildTimeout + 10*time.Minute,
	}
	if cfg.LocalNodes {
		rcfg.Queues[hostQueue(cfg.ClientID)] = river.QueueConfig{MaxWorkers: cfg.Workers}
		if cfg.Runner != nil {
			rcfg.Queues[hostRunsQueue(cfg.ClientID)] = rcfg.Queues[runsQueue]
		}
	}
	if cfg.river != nil {
		cfg.river(rcfg)
	}

	switch {
	case st.RiverPgx() != nil:
		q.client, err = river.NewClient(riverpgxv5.New(st.RiverPgx()), rcfg)
	default:
		q.client, err = river.NewClient(riversqlite.New(st.RiverSQLite()), rcfg)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	return q, nil
}

// Start starts working builds, and returns once the workers run. Cancelling
// ctx later stops the queue as StopAndCancel would; prefer Stop.
func (q *Queue) Start(ctx context.Context) error {
	if q.clusterMode() {
		// A host back after a crash was last seen long ago: it says it lives before it
		// takes a job, or the leader would fail that job as one of a dead host's.
		if err := q.beat(ctx); err != nil {
			q.logger.Error("queue: recording this host's heartbeat", "error", err)
		}
	}
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("starting the build queue: %w", err)
	}
	if q.clusterMode() {
		q.beats.start(q)
	}
	return nil
}

// releaseTimeout is how long Stop waits for cancelled builds to put
// themselves back in the queue.
const releaseTimeout = 30 * time.Second

// Stop stops fetching builds and waits for the running ones to finish. If ctx
// ends first, it cancels them: each goes back to queued, and its job back to
// the queue for the next fedhost, instead of staying running. Stop on a queue
// that is not running does nothing.
func (q *Queue) Stop(ctx context.Context) error {
	q.beats.stop()
	err := q.client.Stop(ctx)
	if err == nil || ctx.Err() == nil {
		return err
	}
	q.logger.Warn("queue: stop deadline reached with builds running; releasing them")
	hard, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := q.client.StopAndCancel(hard); err != nil {
		return fmt.Errorf("stopping the build queue: running builds not released within %s: %w", releaseTimeout, err)
	}
	return nil
}

// EnqueueBuild queues a stored build. It returns an error wrapping
// store.ErrBuildFinished if the build is finished; enqueueing the same build twice is
// harmless.
func (q *Queue) EnqueueBuild(ctx context.Context, buildID string) error {
	b, err := q.store.GetBuild(ctx, buildID)
	if err != nil {
		return err
	}
	if b.State.Finished() {
		return fmt.Errorf("build %s is already %s: %w", buildID, b.State, store.ErrBuildFinished)
	}
	d, err := q.store.GetDeployment(ctx, b.DeploymentID)
	if err != nil {
		return err
	}
	var opts *river.InsertOpts
	if d.NodeHost != "" {
		opts = &river.InsertOpts{Queue: hostQueue(d.NodeHost)}
	}
	res, err := q.client.Insert(ctx, buildArgs{BuildID: b.ID, DeploymentID: b.DeploymentID}, opts)
	if err != nil {
		return fmt.Errorf("enqueueing build %s: %w", buildID, err)
	}
	return q.store.SetBuildJob(ctx, b.ID, res.Job.ID)
}

// handOver queues a build picked up on a host that does not hold its deployment's local
// nodes in the queue of the host that does.
func (q *Queue) handOver(ctx context.Context, args buildArgs, owner string) error {
	res, err := q.client.Insert(ctx, args, &river.InsertOpts{Queue: hostQueue(owner)})
	if err != nil {
		return fmt.Errorf("handing build %s over to %s: %w", args.BuildID, owner, err)
	}
	return q.store.SetBuildJob(ctx, args.BuildID, res.Job.ID)
}

// Cancel cancels a queued or running build: a queued one is canceled at once, a running
// one when its worker sees the cancellation (River cancels its context).
func (q *Queue) Cancel(ctx context.Context, buildID string) error {
	b, err := q.store.GetBuild(ctx, buildID)
	if err != nil {
		return err
	}
	if b.State.Finished() {
		return fmt.Errorf("build %s is already %s: %w", buildID, b.State, store.ErrBuildFinished)
	}
	if b.JobID != 0 {
		if _, err := q.client.JobCancel(ctx, b.JobID); err != nil {
			return fmt.Errorf("canceling build %s: %w", buildID, err)
		}
	}
	if b.State == store.BuildQueued {
		if err := q.store.SetBuildState(ctx, buildID, store.BuildCanceled, "canceled before it ran"); err != nil && !errors.Is(err, store.ErrBuildFinished) {
			return err
		}
	}
	return nil
}

// hostQueue is the River queue of the builds of the host with River client ID clientID:
// a digest, since a queue name is short and of few characters.
func hostQueue(clientID string) string { return hostQueuePrefix + clientDigest(clientID) }

// hostRunsQueue is the River queue of the operation runs of the host with River client ID
// clientID.
func hostRunsQueue(clientID string) string { return hostRunsQueuePrefix + clientDigest(clientID) }

// The prefixes of the per-host queues, which failDeadHosts looks for.
const (
	hostQueuePrefix     = "host_"
	hostRunsQueuePrefix = "hostruns_"
)

func clientDigest(clientID string) string {
	sum := sha256.Sum256([]byte(clientID))
	return hex.EncodeToString(sum[:8])
}

// lostReason is the reason of a build whose fedhost process ended while it ran.
const lostReason = "lost: the fedhost process running this build stopped before it finished; submit again to continue from what exists"

// FailLost finds the build jobs that were running when this process last ended (the jobs
// last attempted by its ClientID; with none, every running job), cancels them, and marks
// their builds failed with a reason. Call it at start, before Start. Another process's
// running builds are left alone: with ClientIDs set, several hosts may share a database.
func (q *Queue) FailLost(ctx context.Context) ([]string, error) {
	// SQLite keeps args as binary JSONB; json() gives them back as text.
	// A periodic job left running would also block its next runs (one at a time) until
	// River's rescuer, an hour later, took it back: it is cancelled too.
	const update = `UPDATE river_job SET state = 'cancelled', finalized_at = %s
		WHERE kind IN ('build', 'periodic', 'run') AND state = 'running'%s RETURNING kind, %s`
	var rows jobRows
	switch {
	case q.store.RiverPgx() != nil:
		mine, args := "", []any{}
		if q.clientID != "" {
			mine, args = " AND attempted_by[array_upper(attempted_by, 1)] = $1", []any{q.clientID}
		}
		r, err := q.store.RiverPgx().Query(ctx, fmt.Sprintf(update, "now()", mine, "args"), args...)
		if err != nil {
			return nil, fmt.Errorf("finding lost builds: %w", err)
		}
		defer r.Close()
		rows = r
	default:
		mine, args := "", []any{}
		if q.clientID != "" {
			mine, args = " AND json_extract(attempted_by, '$[#-1]') = ?", []any{q.clientID}
		}
		r, err := q.store.RiverSQLite().QueryContext(ctx, fmt.Sprintf(update, "datetime('now', 'subsec')", mine, "json(args)"), args...)
		if err != nil {
			return nil, fmt.Errorf("finding lost builds: %w", err)
		}
		defer r.Close()
		rows = r
	}
	l, err := q.lostJobs(rows)
	if err != nil {
		return nil, err
	}
	return l.builds, q.markLost(ctx, l)
}
