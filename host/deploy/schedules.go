package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/app"
)

// cronParser reads the five fields of a cron line (minute hour day month weekday) and
// the @hourly, @daily, ... descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ScheduleRequest asks for a schedule of an app's operation.
type ScheduleRequest struct {
	App, Operation, Cron string
	Input                []byte
	Actor                string
}

// location is the deployment's time zone, UTC when it names none.
func location(d store.Deployment) *time.Location {
	if loc, err := time.LoadLocation(d.TimeZone); err == nil && d.TimeZone != "" {
		return loc
	}
	return time.UTC
}

// nextRun is the first time of expr after t, in loc.
func nextRun(expr string, loc *time.Location, t time.Time) (time.Time, error) {
	s, err := cronParser.Parse(expr)
	if err != nil {
		return time.Time{}, err
	}
	return s.Next(t.In(loc)), nil
}

// AddSchedule checks a schedule's cron line and input against the operation and stores
// it, next due at the first time of the cron line in the deployment's time zone. An
// operation with a secret input cannot be scheduled: a schedule keeps its input.
func (e *Engine) AddSchedule(ctx context.Context, deploymentID string, req ScheduleRequest) (store.RunSchedule, error) {
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return store.RunSchedule{}, err
	}
	if d.State == StateDestroyed {
		return store.RunSchedule{}, refuse(CodeConflict, "", "the deployment is destroyed")
	}
	if len(req.Cron) > 100 {
		return store.RunSchedule{}, refuse(CodeInvalidConfiguration, "/cron", "the cron line is longer than 100 characters")
	}
	next, err := nextRun(req.Cron, location(d), e.now())
	if err != nil {
		return store.RunSchedule{}, refuse(CodeInvalidConfiguration, "/cron", "give five fields (minute hour day month weekday, such as 30 3 * * *) or @hourly, @daily, @weekly")
	}
	cat, cfg, err := e.appsOf(ctx, d)
	if err != nil {
		return store.RunSchedule{}, err
	}
	if a, ok := cfg.Apps[req.App]; !ok || !a.Enable {
		return store.RunSchedule{}, refuse(CodeNotFound, "/app", "the deployment has no enabled app of that name")
	}
	ops, err := e.commandOperations(ctx, cat, req.App)
	if err != nil {
		return store.RunSchedule{}, err
	}
	i := slices.IndexFunc(ops, func(op app.Operation) bool { return op.Name == req.Operation })
	if i < 0 || ops[i].Name == app.OperationSyncRoles {
		return store.RunSchedule{}, refuse(CodeNotFound, "/operation", "app %s has no such operation", req.App)
	}
	in, err := checkInput(ops[i], req.Input, maxRunInput)
	if err != nil {
		return store.RunSchedule{}, err
	}
	for name := range app.SecretInputs(ops[i].Input, in) {
		return store.RunSchedule{}, refuse(CodeInvalidConfiguration, "/input/"+name, "a schedule keeps its input, and this one is secret: run the operation by hand instead")
	}
	return e.opts.Store.CreateRunSchedule(ctx, store.RunSchedule{
		DeploymentID: d.ID, App: req.App, Operation: req.Operation, Cron: req.Cron, Input: string(in), Actor: req.Actor, NextAt: next,
	})
}

// runSchedules queues a run of every schedule due at now, once however many of its times
// passed while no fedhost ran, and moves each to its next time after now. A schedule of
// a suspended or destroyed deployment queues nothing and moves on. Each run takes the
// slot of its schedule's time with it (store.CreateScheduledRun): two schedulers at once,
// as an old leader and a new one, queue each scheduled time once.
func (e *Engine) runSchedules(ctx context.Context, now time.Time) (int, error) {
	due, err := e.opts.Store.DueRunSchedules(ctx, now)
	if err != nil {
		return 0, err
	}
	queued := 0
	var errs []error
	for _, sc := range due {
		d, err := e.opts.Store.GetDeployment(ctx, sc.DeploymentID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		next, err := nextRun(sc.Cron, location(d), now)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.ID, err))
			continue
		}
		claimed, err := e.opts.Store.ClaimSchedule(ctx, sc, next)
		if err != nil || !claimed {
			errs = append(errs, err)
			continue
		}
		if d.State == StateSuspended || d.State == StateExported || d.State == StateDestroyed {
			continue
		}
		_, err = e.StartRun(ctx, d.ID, RunRequest{App: sc.App, Operation: sc.Operation, Input: []byte(sc.Input), Actor: "scheduler", Trigger: store.RunScheduled,
			schedule: &scheduledRun{id: sc.ID, at: sc.NextAt, ranAt: now}})
		if errors.Is(err, store.ErrSlotTaken) {
			// Another scheduler queued this time (an old leader still ticking while a new
			// one starts): not again.
			e.log.Debug("a scheduled run was queued already", "deployment_id", d.ID, "schedule", sc.ID, "at", sc.NextAt.UTC().Format(time.RFC3339))
			continue
		}
		if err != nil {
			e.log.Warn("a scheduled run was not queued", "deployment_id", d.ID, "app", sc.App, "operation", sc.Operation, "error", err)
			continue
		}
		queued++
	}
	return queued, errors.Join(errs...)
}
