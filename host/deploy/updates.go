package deploy

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/scheduler"
)

// UpdateAvailable says whether a deployment runs an older revision than the newest.
func (e *Engine) UpdateAvailable(d store.Deployment) (from, to string, available bool) {
	current := e.newestRevision()
	return d.CatalogRevision, current, current != "" && d.CatalogRevision != "" && d.CatalogRevision != current
}

// newestRevision is the revision of the newest installed apps; "" for an engine without
// a catalog, which has no update to offer.
func (e *Engine) newestRevision() string {
	if e.opts.Catalog == nil {
		return ""
	}
	current, _ := e.opts.Catalog.Revision()
	return current
}

// RunUpdates evaluates every deployment's update policy at now and submits the stored
// configuration of each due one against the newest revision, once per revision: the
// scheduler's tick. Each submit is audited as automatic_update.
func (e *Engine) RunUpdates(ctx context.Context, now time.Time) ([]scheduler.Decision, error) {
	ds, err := e.opts.Store.ListDeployments(ctx, "")
	if err != nil {
		return nil, err
	}
	return e.runUpdates(ctx, now, ds)
}

// tickUpdates is runUpdates on the deployments an update may be due for
// (store.UpdateCandidates): the others' decisions say not due, and the tick does not
// keep decisions.
func (e *Engine) tickUpdates(ctx context.Context, now time.Time) ([]scheduler.Decision, error) {
	ds, err := e.opts.Store.UpdateCandidates(ctx, e.newestRevision())
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return e.runUpdates(ctx, now, ds)
}

func (e *Engine) runUpdates(ctx context.Context, now time.Time, ds []store.Deployment) ([]scheduler.Decision, error) {
	current := e.newestRevision() // "": nothing is due
	byID := make(map[string]store.Deployment, len(ds))
	candidates := make([]scheduler.Candidate, 0, len(ds))
	for _, d := range ds {
		byID[d.ID] = d
		p := PolicyOf(d)
		candidates = append(candidates, scheduler.Candidate{
			ID: d.ID, State: d.State, CurrentRevision: d.CatalogRevision, NewestRevision: current,
			LastAutoRevision: d.LastAutoRevision,
			Policy:           scheduler.Policy{Policy: p.Policy, WindowStart: p.WindowStart, WindowMinutes: p.WindowMinutes, TimeZone: p.TimeZone},
		})
	}
	decisions := scheduler.Tick(now, candidates)
	busy, err := e.opts.Store.BusyDeployments(ctx)
	if err != nil {
		return decisions, err
	}
	actx := audit.WithActor(ctx, audit.Actor{ID: "scheduler", Issuer: audit.IssuerScheduler})
	for _, dec := range decisions {
		if !dec.Due || busy[dec.ID] {
			// A deployment with a build queued or running is due again at the next tick.
			continue
		}
		d := byID[dec.ID]
		// The stored configuration as a submit with the updates applied takes it: the
		// renames from the versions it was made for to the newest, and the newest
		// schemas' defaults. One the newest schemas refuse goes as it is stored: its
		// build then fails saying why (a version guard, an option the plugin refuses),
		// as any failed update shows.
		cfg, refs := json.RawMessage(d.Config), e.storedRefs(d)
		if migrated, migratedRefs, _, err := e.check(ctx, d, cfg, current, nil); err == nil {
			cfg, refs = migrated, migratedRefs
		}
		b, err := e.enqueue(actx, d, store.OperationDeploy, cfg, refs, current)
		ev := audit.Event{Action: "automatic_update", DeploymentID: d.ID, Result: audit.ResultOK, Reason: d.CatalogRevision + " to " + current}
		if err != nil {
			// A build of the deployment is running, or the queue is full: the next tick tries again.
			ev.Result, ev.Reason = audit.ResultError, "not queued: "+errorCode(err)
			e.log.Warn("automatic update not queued", "deployment", d.ID, "error", err)
		} else {
			ev.BuildID = b.ID
			if err := e.opts.Store.UpdateDeployment(ctx, d.ID, map[string]any{"last_auto_revision": current}); err != nil {
				return decisions, err
			}
			e.log.Info("automatic update queued", "deployment", d.ID, "from", d.CatalogRevision, "to", current, "build", b.ID)
		}
		if e.opts.Audit != nil {
			if err := e.opts.Audit.Record(actx, ev); err != nil {
				e.log.Error("recording an automatic update", "error", err)
			}
		}
	}
	return decisions, nil
}

func errorCode(err error) string {
	if de, ok := err.(*Error); ok {
		return de.Code
	}
	return "internal"
}
