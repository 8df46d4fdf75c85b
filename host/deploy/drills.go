package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// A restore drill restores an app's newest backup into a scratch database of the same
// PostgreSQL server, checks that it holds tables (and counts their rows), and drops it.
// It runs as a build of the deployment, so it never runs beside a deploy or a backup,
// daily for each app whose backups have a good one, and on demand. A failed drill shows
// like a failed backup: a backup nobody has restored is a hope, not a backup.

// DrillEvery is how often an app's backups are drilled.
const DrillEvery = 24 * time.Hour

// drillSuffix names the scratch database's instance: <app>-drill.
const drillSuffix = "-drill"

// drill restores the newest backup of app into a scratch database, inspects it and
// removes it, recording the attempt and its outcome whatever fails.
func (r *run) drill(ctx context.Context, app string) error {
	st := r.e.opts.Store
	bg := context.WithoutCancel(ctx)
	start := r.e.now()
	if err := st.DrillStarted(bg, r.d.ID, app, start); err != nil {
		return err
	}
	d, err := r.drillOnce(ctx, app)
	d.Seconds = r.e.now().Sub(start).Seconds()
	if err != nil {
		d.Error = err.Error()
	}
	if rerr := st.DrillFinished(bg, r.d.ID, app, d, r.e.now()); rerr != nil {
		r.e.log.Error("recording the end of a restore drill", "deployment", r.d.ID, "app", app, "error", rerr)
	}
	return err
}

func (r *run) drillOnce(ctx context.Context, app string) (store.Drill, error) {
	t, _, err := r.target(ctx, app, false)
	if err != nil {
		return store.Drill{}, fmt.Errorf("restore drill of %s: %w", app, err)
	}
	list, err := backup.Snapshots(ctx, t)
	if err != nil {
		return store.Drill{}, fmt.Errorf("restore drill of %s: listing its backups: %w", app, err)
	}
	var newest *backup.Snapshot
	for i := range list {
		if list[i].Database != "" {
			newest = &list[i]
		}
	}
	if newest == nil {
		return store.Drill{}, fmt.Errorf("restore drill of %s: its repository holds no backup of a database", app)
	}
	d := store.Drill{Snapshot: newest.ID}

	// The scratch database, asked of the app's own postgresql provider: the same server,
	// a database and role of the deployment's, removed at the end whatever happens.
	c, provider, err := r.e.route(contract.PostgreSQL)
	if err != nil {
		return d, err
	}
	s := step{App: app, Name: app + drillSuffix, Request: "drill", Type: contract.PostgreSQL, Provider: provider,
		Spec: json.RawMessage(`{}`), client: c}
	r.event(store.LevelInfo, "drill", 10, "restoring backup %s of %s into a scratch database", newest.ID, app)
	raw, err := r.provision(ctx, s, 20)
	defer func() {
		if row, ok := r.rows[s.Name]; ok {
			if err := r.deprovision(context.WithoutCancel(ctx), row, false); err != nil {
				r.event(store.LevelWarn, "drill", 95, "the scratch database of %s was not removed: %v; the next deploy removes it", app, err)
			}
		}
	}()
	if err != nil {
		return d, fmt.Errorf("restore drill of %s: the scratch database: %w", app, err)
	}
	var pg contract.PostgreSQLResult
	if err := json.Unmarshal(raw, &pg); err != nil {
		return d, fmt.Errorf("restore drill of %s: the scratch database's result: %w", app, err)
	}
	password, err := r.e.reveal(ctx, r.d.Namespace, r.rows[s.Name].SecretInstance, pg.Password.Secret)
	if err != nil {
		return d, err
	}
	db := &backup.Database{Host: pg.Host, Port: pg.Port, Database: pg.Database, User: pg.User, Password: string(password), SSLMode: pg.SSLMode}
	files := ""
	if newest.FilesID != "" {
		if files, err = os.MkdirTemp("", "fedhost-drill-"); err != nil {
			return d, err
		}
		defer os.RemoveAll(files)
	}
	if err := backup.Restore(ctx, t, newest.ID, db, files); err != nil {
		return d, fmt.Errorf("restore drill of %s: %w", app, err)
	}
	got, err := backup.Inspect(ctx, db)
	if err != nil {
		return d, fmt.Errorf("restore drill of %s: %w", app, err)
	}
	d.Tables, d.Rows = got.Tables, got.Rows
	if got.Tables == 0 {
		return d, fmt.Errorf("restore drill of %s: backup %s restored no table", app, newest.ID)
	}
	r.event(store.LevelInfo, "verdict", 100, "backup %s of %s restores: %d tables, %d rows", newest.ID, app, got.Tables, got.Rows)
	return d, nil
}

// runDrills queues the restore drills that are due at now: each app of an active (or
// failed) deployment with a good backup and no drill for DrillEvery (counted from the
// start of its backups before its first drill), one build per
// deployment and tick, after the backups (Tick runs them first, and a deployment with a
// build queued or running waits).
//
// tickDrills gives it the deployments the database says have a drill due
// (store.DrillCandidates) and their records.
func (e *Engine) tickDrills(ctx context.Context, now time.Time) ([]store.Build, error) {
	ids, err := e.opts.Store.DrillCandidates(ctx, backedUpStates, now.Add(-DrillEvery))
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	ds, err := e.opts.Store.DeploymentsByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	records, err := e.opts.Store.AppBackupsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	return e.runDrills(ctx, now, ds, records)
}

// runDrills decides on ds, with records their backup records.
func (e *Engine) runDrills(ctx context.Context, now time.Time, ds []store.Deployment, records []store.AppBackup) ([]store.Build, error) {
	byDeployment := map[string][]store.AppBackup{}
	for _, r := range records {
		byDeployment[r.DeploymentID] = append(byDeployment[r.DeploymentID], r)
	}
	busy, err := e.opts.Store.BusyDeployments(ctx)
	if err != nil {
		return nil, err
	}
	actx := audit.WithActor(ctx, audit.Actor{ID: "scheduler", Issuer: audit.IssuerScheduler})
	var queued []store.Build
	for _, d := range ds {
		if !backedUp(d.State) || busy[d.ID] {
			continue
		}
		for _, rec := range byDeployment[d.ID] {
			// The first drill is a day after the app's backups started, then a day after
			// each drill: not at once after an app's first backup.
			base := rec.Since
			if rec.LastDrillAt != nil && rec.LastDrillAt.After(base) {
				base = *rec.LastDrillAt
			}
			if rec.LastSuccessAt == nil || now.Sub(base) < DrillEvery {
				continue
			}
			b, err := e.operate(actx, d, store.OperationDrill, Operation{App: rec.App})
			ev := audit.Event{Action: "scheduled_drill", DeploymentID: d.ID, Result: audit.ResultOK, Reason: rec.App}
			if err != nil {
				ev.Result, ev.Reason = audit.ResultError, rec.App+" not queued: "+errorCode(err)
				e.log.Warn("restore drill not queued", "deployment", d.ID, "app", rec.App, "error", err)
			} else {
				ev.BuildID = b.ID
				queued = append(queued, b)
				e.log.Info("restore drill queued", "deployment", d.ID, "app", rec.App, "build", b.ID)
			}
			if e.opts.Audit != nil {
				if err := e.opts.Audit.Record(actx, ev); err != nil {
					e.log.Error("recording a scheduled restore drill", "error", err)
				}
			}
			break
		}
	}
	return queued, nil
}

// DrillSuccess is when an app's newest good restore drill ended.
type DrillSuccess struct {
	DeploymentID, App string
	At                time.Time
}

// DrillHealth counts, over every backed-up deployment, the apps whose newest restore
// drill failed, and gives when each app's newest good drill ended: one query, for the
// metrics.
func (e *Engine) DrillHealth(ctx context.Context) (failedApps int, good []DrillSuccess, err error) {
	records, err := e.opts.Store.AppBackupsWithState(ctx)
	if err != nil {
		return 0, nil, err
	}
	for _, r := range records {
		if !backedUp(r.DeploymentState) {
			continue
		}
		if r.DrillError != "" {
			failedApps++
		}
		if r.LastGoodDrillAt != nil {
			good = append(good, DrillSuccess{DeploymentID: r.DeploymentID, App: r.App, At: *r.LastGoodDrillAt})
		}
	}
	return failedApps, good, nil
}
