package queue

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/robfig/cron/v3"

	"github.com/fedhost/fedhost/scheduler"
)

// Periodic is work the queue runs on a schedule, such as the scheduler's tick. Only the
// elected leader among the fedhost processes working one database inserts its jobs
// (River's leader election), so in a cluster one host schedules; any host may run them.
//
// River keeps the schedule in the leader's memory: a job due while no fedhost ran is not
// made up for, and a new leader starts the schedule afresh (and runs the job at once).
// Each job is unique per scheduled time (periodicArgs.At), so a new leader does not run
// again what the one before it ran for the same time. Run must still decide what is due
// from what the database records, never from being called.
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

// periodicArgs are the arguments of a "periodic" job: which one, and the scheduled time
// it is the run of.
type periodicArgs struct {
	ID string    `json:"id" river:"unique"`
	At time.Time `json:"at" river:"unique"`
}

func (periodicArgs) Kind() string { return "periodic" }

// InsertOpts keeps one job per periodic job and scheduled time, whatever became of it:
// when the leader dies, the next one starts the schedule afresh (RunOnStart) and would
// otherwise run again the scheduled time just run. River keeps a finished job for a day
// (CompletedJobRetentionPeriod), which covers the daily and shorter schedules used.
func (periodicArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: periodicQueue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{
			rivertype.JobStateAvailable,
			rivertype.JobStateCancelled,
			rivertype.JobStateCompleted,
			rivertype.JobStateDiscarded,
			rivertype.JobStatePending,
			rivertype.JobStateRetryable,
			rivertype.JobStateRunning,
			rivertype.JobStateScheduled,
		},
	}}
}

// scheduledTime is the time of schedule s that a run inserted at now is for: its latest
// activation at or before now. River fires a schedule at its activation (a little late,
// never early), so consecutive runs get consecutive times and a new leader's run at start
// gets the time the old leader last ran, if it did. An @every schedule has no anchor of
// its own: its times are multiples of its interval.
func scheduledTime(s cron.Schedule, now time.Time) time.Time {
	now = now.UTC()
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return now.Truncate(every.Delay)
	}
	// Look back twice as far each time until an activation falls in the window, then walk
	// forward to the last one at or before now.
	for back := time.Minute; back <= maxScheduleGap; back *= 2 {
		t := s.Next(now.Add(-back))
		if t.IsZero() {
			break // robfig/cron gives up on a schedule with no activation in five years
		}
		if t.After(now) {
			continue
		}
		for n := s.Next(t); !n.IsZero() && !n.After(now); n = s.Next(t) {
			t = n
		}
		return t.UTC()
	}
	return now.Truncate(time.Minute)
}

// maxScheduleGap bounds how far back scheduledTime looks for an activation.
const maxScheduleGap = 2 * 366 * 24 * time.Hour

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
			// River's schedule runs on the real clock, whatever Config.Clock tells the jobs.
			return periodicArgs{ID: id, At: scheduledTime(schedule, time.Now())}, nil
		}, &river.PeriodicJobOpts{ID: id, RunOnStart: true}))
	}
	return byID, out, nil
}
