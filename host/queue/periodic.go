package queue

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/fedhost/fedhost/scheduler"
)

// Periodic is work the queue runs on a schedule, such as the scheduler's tick. Only the
// elected leader among the fedhost processes working one database inserts its jobs
// (River's leader election), so in a cluster one host schedules; any host may run them.
//
// River keeps the schedule in the leader's memory: a job due while no fedhost ran is not
// made up for, and a new leader starts the schedule afresh (and runs the job at once).
// Run must therefore decide what is due from what the database records, never from
// being called.
type Periodic struct {
	// ID names the job, unique among the queue's periodic jobs, e.g. "scheduler-tick".
	ID string
	// Schedule is a cron spec (five fields, or @every 1m, @daily, ...; CRON_TZ=<zone>
	// first for a time zone), parsed by scheduler.ParseCron.
	Schedule string
	// Run does the work at now, the time the job started.
	Run func(ctx context.Context, now time.Time) error
}

// periodicQueue is the River queue of the periodic jobs.
const periodicQueue = "scheduler"

// periodicArgs are the arguments of a "periodic" job.
type periodicArgs struct {
	ID string `json:"id" river:"unique"`
}

func (periodicArgs) Kind() string { return "periodic" }

// InsertOpts keeps one waiting or running job per periodic job: a tick that takes longer
// than its interval is not stacked up.
func (periodicArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: periodicQueue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{
			rivertype.JobStateAvailable,
			rivertype.JobStatePending,
			rivertype.JobStateRunning,
			rivertype.JobStateScheduled,
		},
	}}
}

// periodicWorker runs the periodic jobs by id.
type periodicWorker struct {
	river.WorkerDefaults[periodicArgs]
	jobs   map[string]Periodic
	clock  func() time.Time
	logger *slog.Logger
}

// periodicTimeout bounds one run of a periodic job.
const periodicTimeout = 30 * time.Minute

func (w *periodicWorker) Timeout(*river.Job[periodicArgs]) time.Duration { return periodicTimeout }

func (w *periodicWorker) Work(ctx context.Context, job *river.Job[periodicArgs]) error {
	p, ok := w.jobs[job.Args.ID]
	if !ok {
		// A job of an older fedhost that had this periodic job.
		return river.JobCancel(fmt.Errorf("no periodic job %q in this fedhost", job.Args.ID))
	}
	started := time.Now()
	err := p.Run(ctx, w.clock())
	// How long a run took, for the operator who watches a tick grow with the deployments
	// (docs/benchmarks.md measures it from this line).
	w.logger.Info("queue: periodic job ran", "job", p.ID, "seconds", time.Since(started).Seconds())
	if err != nil {
		// Not retried: the next run is due soon and decides afresh.
		w.logger.Error("queue: periodic job failed", "job", p.ID, "error", err)
		return river.JobCancel(err)
	}
	return nil
}

// periodicJobs turns the queue's periodic jobs into River's.
func periodicJobs(jobs []Periodic) (map[string]Periodic, []*river.PeriodicJob, error) {
	byID := map[string]Periodic{}
	var out []*river.PeriodicJob
	for _, p := range jobs {
		if p.ID == "" || p.Run == nil {
			return nil, nil, fmt.Errorf("queue: a periodic job needs an ID and a Run function")
		}
		if _, dup := byID[p.ID]; dup {
			return nil, nil, fmt.Errorf("queue: two periodic jobs are called %q", p.ID)
		}
		schedule, err := scheduler.ParseCron(p.Schedule)
		if err != nil {
			return nil, nil, fmt.Errorf("queue: periodic job %s: schedule %q: %v (use five cron fields, or @every 1m, @daily)", p.ID, p.Schedule, err)
		}
		byID[p.ID] = p
		id := p.ID
		out = append(out, river.NewPeriodicJob(schedule, func() (river.JobArgs, *river.InsertOpts) {
			return periodicArgs{ID: id}, nil
		}, &river.PeriodicJobOpts{ID: id, RunOnStart: true}))
	}
	return byID, out, nil
}
