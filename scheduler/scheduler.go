package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Clock tells the time; tests inject one to drive policy evaluation.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the real clock.
var SystemClock Clock = ClockFunc(time.Now)

// Option configures a Scheduler.
type Option func(*Scheduler)

// WithClock sets the clock whose time the jobs receive (default SystemClock).
func WithClock(c Clock) Option { return func(s *Scheduler) { s.clock = c } }

// WithLogger sets where the scheduler reports a panicking job and a skipped run
// (default cron.DefaultLogger, standard output).
func WithLogger(l cron.Logger) Option { return func(s *Scheduler) { s.logger = l } }

// Scheduler runs jobs on cron schedules. Lifecycle: New, Schedule, Start, Stop; Stop
// is idempotent and a stopped Scheduler may Start again.
//
// The cron fires by the real clock, in UTC unless a spec starts with
// CRON_TZ=<zone>; the time a job receives is the injected Clock's Now at the moment it
// fires. Tests thus decide what a job sees without waiting for a schedule, and a job
// must take the time it is given, never time.Now.
type Scheduler struct {
	clock  Clock
	logger cron.Logger
	cron   *cron.Cron

	mu      sync.Mutex
	started bool
	stopped context.Context // done when the jobs running at the last Stop returned
}

// New returns a stopped Scheduler.
func New(opts ...Option) *Scheduler {
	s := &Scheduler{clock: SystemClock, logger: cron.DefaultLogger}
	for _, o := range opts {
		o(s)
	}
	// A panicking job must not take the host down, and a tick still running when the
	// next one is due is skipped rather than run twice at once.
	s.cron = cron.New(cron.WithLocation(time.UTC), cron.WithChain(cron.Recover(s.logger), cron.SkipIfStillRunning(s.logger)))
	return s
}

// Schedule adds job on spec: five fields (minute hour day-of-month month day-of-week)
// or a descriptor such as @daily or @every 10m. It may be called before or after Start.
func (s *Scheduler) Schedule(spec string, job func(time.Time)) error {
	if _, err := s.cron.AddFunc(spec, func() { job(s.clock.Now()) }); err != nil {
		return fmt.Errorf("schedule %q: %v (use five fields, minute hour day-of-month month day-of-week, or @daily, @hourly, @every 10m)", spec, err)
	}
	return nil
}

// Start starts running the schedules in the background; it does nothing if started.
func (s *Scheduler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	s.cron.Start()
}

// Started reports whether the Scheduler runs.
func (s *Scheduler) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Stop stops firing new runs and waits for the running jobs to return, or for ctx to
// end (its error is then returned). Stopping again waits for the same jobs; stopping a
// Scheduler that never started returns nil.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.started = false
		s.stopped = s.cron.Stop()
	}
	done := s.stopped
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping the scheduler: jobs still running: %w", ctx.Err())
	}
}
