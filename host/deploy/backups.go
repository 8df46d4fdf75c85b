package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/scheduler"
	"github.com/fedhost/fedhost/sdk/contract"
)

// StaleAfter is how old an app's last good backup may be before the app shows as stale:
// a day's schedule and half a day for a run that failed or ran late.
const StaleAfter = 36 * time.Hour

// BackupPolicy is when an app's data is backed up and how long its backups are kept.
type BackupPolicy struct {
	// Schedule is a cron spec (five fields, or @daily, @every 12h; CRON_TZ= for a zone).
	Schedule string
	// KeepWithin is how long backups are kept, counted back from the newest one.
	KeepWithin time.Duration
}

// DefaultBackupPolicy backs up daily and keeps 30 days.
var DefaultBackupPolicy = BackupPolicy{Schedule: "@daily", KeepWithin: 30 * 24 * time.Hour}

// BackupStatus is where an app's backups in a deployment stand.
type BackupStatus struct {
	App string `json:"app"`
	// Schedule and KeepWithin are the app's backup policy; KeepWithin in hours.
	Schedule        string `json:"schedule"`
	KeepWithinHours int    `json:"keep_within_hours"`
	// NextAt is when the schedule next takes a backup (the next tick at or after it).
	NextAt        *time.Time `json:"next_at,omitempty"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	LastTrigger   string     `json:"last_trigger,omitempty"`
	LastBuildID   string     `json:"last_build_id,omitempty"`
	LastSuccessAt *time.Time `json:"last_success_at,omitempty"`
	LastSnapshot  string     `json:"last_snapshot,omitempty"`
	// LastError is why the newest backup failed; Failures counts the failures since the
	// last good backup.
	LastError string `json:"last_error,omitempty"`
	Failures  int    `json:"failures"`
	// Stale is set when the last good backup (or, before any, the start of the app's
	// backups) is older than StaleAfter while the deployment is backed up (active, or
	// failed).
	Stale bool `json:"stale"`
	// The newest restore drill: when it started, when the newest good one ended, what it
	// restored and found, how long it took, and why the newest failed (empty when it did
	// not).
	LastDrillAt     *time.Time `json:"last_drill_at,omitempty"`
	LastGoodDrillAt *time.Time `json:"last_good_drill_at,omitempty"`
	DrillSnapshot   string     `json:"drill_snapshot,omitempty"`
	DrillTables     int        `json:"drill_tables"`
	DrillRows       int64      `json:"drill_rows"`
	DrillSeconds    float64    `json:"drill_seconds"`
	DrillError      string     `json:"drill_error,omitempty"`
}

// backupPolicy returns an app's policy and its parsed schedule.
func (e *Engine) backupPolicy(app string) (BackupPolicy, cron.Schedule, error) {
	p := DefaultBackupPolicy
	if e.opts.BackupPolicy != nil {
		p = e.opts.BackupPolicy(app)
	}
	s, err := scheduler.ParseCron(p.Schedule)
	if err != nil {
		return p, nil, fmt.Errorf("backup schedule of %s: %q: %w", app, p.Schedule, err)
	}
	return p, s, nil
}

// backupApps returns the apps of rows with data to back up: a database and a backups
// bucket, both in use.
func backupApps(rows []store.Resource) []string {
	db, bucket := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		if r.State != store.ResourceProvisioned && r.State != store.ResourceKept {
			continue
		}
		switch {
		case r.Type == contract.PostgreSQL:
			db[r.App] = true
		case r.Type == contract.S3 && backupOnly(r.Spec):
			bucket[r.App] = true
		}
	}
	var out []string
	for app := range db {
		if bucket[app] {
			out = append(out, app)
		}
	}
	sort.Strings(out)
	return out
}

// BackupStatuses returns where the backups of each app of a deployment with data stand.
func (e *Engine) BackupStatuses(ctx context.Context, d store.Deployment) ([]BackupStatus, error) {
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	return e.BackupStatusesFrom(ctx, d, rows)
}

// BackupStatusesFrom is BackupStatuses from the deployment's resource rows, read already.
func (e *Engine) BackupStatusesFrom(ctx context.Context, d store.Deployment, rows []store.Resource) ([]BackupStatus, error) {
	records, err := e.opts.Store.AppBackups(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	byApp := map[string]store.AppBackup{}
	for _, r := range records {
		byApp[r.App] = r
	}
	now := e.now().UTC()
	out := []BackupStatus{}
	for _, app := range backupApps(rows) {
		p, schedule, err := e.backupPolicy(app)
		if err != nil {
			return nil, err
		}
		s := BackupStatus{App: app, Schedule: p.Schedule, KeepWithinHours: int(p.KeepWithin / time.Hour)}
		rec, ok := byApp[app]
		if ok {
			s.LastAttemptAt, s.LastTrigger, s.LastBuildID = rec.LastAttemptAt, rec.LastTrigger, rec.LastBuildID
			s.LastSuccessAt, s.LastSnapshot = rec.LastSuccessAt, rec.LastSnapshot
			s.LastError, s.Failures = rec.LastError, rec.Failures
			s.LastDrillAt, s.LastGoodDrillAt, s.DrillSnapshot = rec.LastDrillAt, rec.LastGoodDrillAt, rec.DrillSnapshot
			s.DrillTables, s.DrillRows, s.DrillSeconds, s.DrillError = rec.DrillTables, rec.DrillRows, rec.DrillSeconds, rec.DrillError
			next := schedule.Next(scheduleBase(rec)).UTC()
			s.NextAt = &next
			s.Stale = backedUp(d.State) && stale(rec, now)
		} else if backedUp(d.State) {
			next := schedule.Next(now).UTC()
			s.NextAt = &next
		}
		out = append(out, s)
	}
	return out, nil
}

// backedUp says whether the schedule backs up a deployment in state: an active one, and
// a failed one, whose data is there all the same (its last build failed, its apps may
// well run). A suspended one's data does not change; a new one has none.
func backedUp(state string) bool { return state == StateActive || state == StateFailed }

// maxSlotSteps bounds the walk of backupSlot over the times missed: a schedule firing
// every minute is caught up from a base up to about a week old.
const maxSlotSteps = 10000

// backupSlot is the scheduled time a backup due at now takes: the schedule's newest time
// at or before now, counted from base. However many times were missed, one backup is
// taken, for the newest; a slot that is taken (submitted, whether its build succeeded or
// not) is not taken again, and the next backup is the next time's. Two schedulers that
// read the same base compute the same slot.
func backupSlot(schedule cron.Schedule, base, now time.Time) time.Time {
	t := schedule.Next(base)
	for range maxSlotSteps {
		next := schedule.Next(t)
		if next.IsZero() || next.After(now) {
			break
		}
		t = next
	}
	return t.UTC()
}

// scheduleBase is the time an app's schedule counts from: its last backup, or when its
// backups started.
func scheduleBase(rec store.AppBackup) time.Time {
	if rec.LastAttemptAt != nil && rec.LastAttemptAt.After(rec.Since) {
		return *rec.LastAttemptAt
	}
	return rec.Since
}

func stale(rec store.AppBackup, now time.Time) bool {
	good := rec.Since
	if rec.LastSuccessAt != nil {
		good = *rec.LastSuccessAt
	}
	return now.Sub(good) > StaleAfter
}

// RunBackups queues the backups that are due at now: each app with data in an active (or
// failed) deployment whose schedule fired since its last backup, or since its backups started.
// What is due is read from the database, so a backup missed while no fedhost ran is
// taken at the next tick. A deployment runs one build at a time: one backup is queued
// per deployment and tick, and one that cannot be queued now is tried at the next tick.
// It returns the builds it queued. Each backup takes its slot (the deployment, the app and
// the scheduled time, see backupSlot) with its build: two schedulers at once, as an old
// leader and a new one, submit each scheduled time once.
func (e *Engine) RunBackups(ctx context.Context, now time.Time) ([]store.Build, error) {
	return e.tickBackups(ctx, now)
}

// tickBackups is runBackups on the deployments the database gives as candidates
// (store.BackupCandidates): those with a record its app's schedule fired since, and once
// an hour (the sweep) those with an app to back up and no record yet. The newest time
// each app's schedule fired at or before now is the cutoff; an app whose schedule does
// not parse, or fires too rarely to find, has every record read, and runBackups reports
// it as before.
func (e *Engine) tickBackups(ctx context.Context, now time.Time) ([]store.Build, error) {
	now = now.UTC()
	apps, err := e.opts.Store.BackedUpApps(ctx)
	if err != nil {
		return nil, err
	}
	cutoffs := map[string]time.Time{}
	for _, app := range apps {
		if _, schedule, err := e.backupPolicy(app); err == nil {
			if at, ok := lastFire(schedule, now); ok {
				cutoffs[app] = at
			}
		}
	}
	sweep := e.sweepDue(now)
	ids, err := e.opts.Store.BackupCandidates(ctx, backedUpStates, cutoffs, sweep)
	if err != nil {
		return nil, err
	}
	if sweep {
		e.swept(now)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	ds, err := e.opts.Store.DeploymentsByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	rows, err := e.opts.Store.ResourcesOfTypesOf(ctx, ids, contract.PostgreSQL, contract.S3)
	if err != nil {
		return nil, err
	}
	records, err := e.opts.Store.AppBackupsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	return e.runBackups(ctx, now, ds, rows, records)
}

// recordBackups writes the backup record of app once the build gave it a database and a
// backups bucket: its schedule counts from now, and the tick finds it by its record
// (store.BackupCandidates) without the sweep, which looks for a database without a record
// in every database and runs once an hour (RecordSweepInterval) for those no build
// recorded (written before this, or a build that stopped between the two).
func (r *run) recordBackups(ctx context.Context, app string) error {
	var rows []store.Resource
	for _, row := range r.rows {
		if row.App == app {
			rows = append(rows, row)
		}
	}
	if !slices.Contains(backupApps(rows), app) {
		return nil
	}
	return r.e.opts.Store.EnsureAppBackup(context.WithoutCancel(ctx), r.d.ID, app, r.e.now())
}

// RecordSweepInterval is how often the tick looks for the apps with a database and no
// backup record (store.BackupCandidates' sweep); each engine sweeps at its first tick.
const RecordSweepInterval = time.Hour

// sweepDue tells whether the tick at now sweeps for the apps without a backup record.
func (e *Engine) sweepDue(now time.Time) bool {
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	return e.sweptAt.IsZero() || now.Sub(e.sweptAt) >= RecordSweepInterval || now.Before(e.sweptAt)
}

// swept records a sweep that answered at now.
func (e *Engine) swept(now time.Time) {
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	e.sweptAt = now
}

// backedUpStates are the states backedUp accepts, for the queries.
var backedUpStates = []string{StateActive, StateFailed}

// lastFire is the newest time schedule fires at or before now: cron has no previous
// time, so it walks forward from windows further and further back, up to four years.
func lastFire(schedule cron.Schedule, now time.Time) (time.Time, bool) {
	for back := 2 * time.Hour; back <= 4*366*24*time.Hour; back *= 4 {
		var last time.Time
		for t := schedule.Next(now.Add(-back)); !t.IsZero() && !t.After(now); t = schedule.Next(t) {
			last = t
		}
		if !last.IsZero() {
			return last, true
		}
	}
	return time.Time{}, false
}

// runBackups decides on ds, with rows their postgresql and s3 resources and records their
// backup records.
func (e *Engine) runBackups(ctx context.Context, now time.Time, ds []store.Deployment, rows []store.Resource, records []store.AppBackup) ([]store.Build, error) {
	now = now.UTC()
	byDeployment := map[string][]store.Resource{}
	for _, r := range rows {
		byDeployment[r.DeploymentID] = append(byDeployment[r.DeploymentID], r)
	}
	recs := map[[2]string]store.AppBackup{}
	for _, r := range records {
		recs[[2]string{r.DeploymentID, r.App}] = r
	}
	busy, err := e.opts.Store.BusyDeployments(ctx)
	if err != nil {
		return nil, err
	}
	actx := audit.WithActor(ctx, audit.Actor{ID: "scheduler", Issuer: audit.IssuerScheduler})
	var queued []store.Build
	var errs []error
	schedules := map[string]cron.Schedule{}
	for _, d := range ds {
		if !backedUp(d.State) {
			continue
		}
		for _, app := range backupApps(byDeployment[d.ID]) {
			rec, ok := recs[[2]string{d.ID, app}]
			if !ok {
				// First seen: the schedule starts now.
				if err := e.opts.Store.EnsureAppBackup(ctx, d.ID, app, now); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			schedule, ok := schedules[app]
			if !ok {
				// Parsed once a tick for each app, not once for each deployment.
				if _, schedule, err = e.backupPolicy(app); err != nil {
					errs = append(errs, err)
					continue
				}
				schedules[app] = schedule
			}
			if schedule.Next(scheduleBase(rec)).After(now) {
				continue
			}
			if busy[d.ID] {
				// Due, but a build of the deployment runs: the next tick after it.
				break
			}
			slot := backupSlot(schedule, scheduleBase(rec), now)
			b, err := e.operate(actx, d, store.OperationBackup, Operation{App: app, Trigger: store.BackupScheduled, slot: &store.Slot{Name: app, At: slot}})
			if errors.Is(err, store.ErrSlotTaken) {
				// Another scheduler (an old leader still ticking, or a new one) submitted
				// this time, or it was submitted and its build failed before the backup
				// began: it is not taken again, and the schedule's next time is the next
				// slot. The deployment's other apps may still be due.
				e.log.Debug("scheduled backup submitted already", "deployment", d.ID, "app", app, "at", slot.Format(time.RFC3339))
				continue
			}
			ev := audit.Event{Action: "scheduled_backup", DeploymentID: d.ID, Result: audit.ResultOK, Reason: app}
			if err != nil {
				ev.Result, ev.Reason = audit.ResultError, app+" not queued: "+errorCode(err)
				e.log.Warn("scheduled backup not queued", "deployment", d.ID, "app", app, "error", err)
			} else {
				ev.BuildID = b.ID
				queued = append(queued, b)
				e.log.Info("scheduled backup queued", "deployment", d.ID, "app", app, "build", b.ID)
			}
			if e.opts.Audit != nil {
				if err := e.opts.Audit.Record(actx, ev); err != nil {
					e.log.Error("recording a scheduled backup", "error", err)
				}
			}
			break // one build per deployment at a time; the next app at the next tick
		}
	}
	return queued, errors.Join(errs...)
}

// Tick is the scheduler's periodic work: due updates, then due certificate renewals
// (an update renews too), then due backups, then due restore drills, then the
// apps' scheduled operations, then the daily domain snapshots and renewals, then the
// syncs of the apps' roles with the directories.
//
// Each job asks the database for its candidates (host/store/tick.go) rather than reading
// every deployment: what it reads grows with what is due, not with the deployments.
// fullReadTick (fullread_test.go) is the tick that read everything, and
// TestTickDecidesAsTheFullRead checks both decide the same.
func (e *Engine) Tick(ctx context.Context, now time.Time) error {
	_, uerr := e.tickUpdates(ctx, now)
	_, rerr := e.tickRenewals(ctx, now)
	_, berr := e.tickBackups(ctx, now)
	_, derr := e.tickDrills(ctx, now)
	_, serr := e.runSchedules(ctx, now)
	domerr := e.runDomainRenewals(ctx, now)
	_, roleerr := e.tickRoleSyncs(ctx, now)
	xerr := e.runExportExpiry(ctx, now)
	return errors.Join(uerr, rerr, berr, derr, serr, domerr, roleerr, xerr)
}

// RunRetention deletes what is kept only for a time: the logs of builds finished longer
// ago than the build log retention, the backups buckets (and their repository password)
// kept after a destroy once their grace period ended, the slots of scheduled jobs older
// than store.SlotsKept, and audit events older than the audit retention. Each part runs
// even when another fails.
func (e *Engine) RunRetention(ctx context.Context, now time.Time) error {
	var errs []error
	if e.opts.BuildLogRetention > 0 {
		n, err := e.opts.Store.PruneBuildLogs(ctx, now.Add(-e.opts.BuildLogRetention))
		if err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			e.log.Info("pruned build logs", "events", n, "older_than", now.Add(-e.opts.BuildLogRetention).Format(time.RFC3339))
		}
	}
	expired, err := e.opts.Store.ExpiredRetained(ctx, now)
	if err != nil {
		errs = append(errs, err)
	}
	byDeployment := map[string][]store.Resource{}
	for _, r := range expired {
		byDeployment[r.DeploymentID] = append(byDeployment[r.DeploymentID], r)
	}
	actx := audit.WithActor(ctx, audit.Actor{ID: "scheduler", Issuer: audit.IssuerScheduler})
	for id, rows := range byDeployment {
		d, err := e.opts.Store.GetDeployment(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r := &run{e: e, d: d}
		if err := r.load(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, row := range rows {
			ev := audit.Event{Action: "retention_expired", DeploymentID: d.ID, Result: audit.ResultOK, Reason: row.Name}
			if err := r.deprovision(ctx, row, false); err != nil {
				errs = append(errs, err)
				ev.Result = audit.ResultError
			} else {
				e.log.Info("grace period over: removed", "deployment", d.ID, "resource", row.Name)
			}
			if e.opts.Audit != nil {
				if err := e.opts.Audit.Record(actx, ev); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if d.State == StateDestroyed {
			// The backups are gone with the bucket: nothing is due or stale any more.
			if err := e.opts.Store.DeleteAppBackups(ctx, d.ID, ""); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// A slot is kept a week past its time (a job's newest for as long as its schedule).
	if n, err := e.opts.Store.PruneScheduleSlots(ctx, now.Add(-store.SlotsKept)); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		e.log.Info("pruned schedule slots", "slots", n)
	}
	if e.opts.Audit != nil && e.opts.AuditRetention > 0 {
		if n, err := e.opts.Audit.PruneRetention(ctx, e.opts.AuditRetention); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			e.log.Info("pruned the audit trail", "events", n)
		}
	}
	return errors.Join(errs...)
}

// backupsTag is the tag of a backup's trigger in the repository.
func backupTags(d store.Deployment, app, trigger string) map[string]string {
	return map[string]string{"deployment": d.Namespace, "app": app, "trigger": trigger}
}

// BackupHealth counts, over every deployment, the apps that are stale as BackupStatuses
// says (no good backup for StaleAfter while backed up) and those whose last backup
// failed: one query, for the metrics.
func (e *Engine) BackupHealth(ctx context.Context) (staleApps, failedApps int, err error) {
	records, err := e.opts.Store.AppBackupsWithState(ctx)
	if err != nil {
		return 0, 0, err
	}
	now := e.now().UTC()
	for _, r := range records {
		if !backedUp(r.DeploymentState) {
			continue
		}
		if stale(r.AppBackup, now) {
			staleApps++
		}
		if r.Failures > 0 {
			failedApps++
		}
	}
	return staleApps, failedApps, nil
}
