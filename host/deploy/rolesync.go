package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/app"
)

// maxRoleSyncInput bounds a role sync's input: the members of an app's role groups.
const maxRoleSyncInput = 1 << 20

// RoleSyncActor is the actor of the role syncs the timer starts.
const RoleSyncActor = "role-sync"

// defaultRoleSyncInterval is how long a successful role sync holds before the timer runs
// another (Options.RoleSyncInterval).
const defaultRoleSyncInterval = time.Hour

// SyncRoles queues, for each enabled app of the deployment that offers
// app.OperationSyncRoles, a run that gives the members of its role groups their roles;
// actor is who changed the directory. It queues nothing for a deployment that is not
// active or has no directory. A sync that fails to queue is an audit event, and the
// timer tries again; a run that fails is recorded as any run.
func (e *Engine) SyncRoles(ctx context.Context, deploymentID, actor string) ([]store.Run, error) {
	if e.opts.Catalog == nil {
		return nil, nil
	}
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil || d.State != StateActive {
		return nil, err
	}
	runs, err := e.syncRoles(ctx, d, actor)
	if err != nil && e.opts.Audit != nil {
		issuer := audit.IssuerSystem
		if actor == RoleSyncActor {
			issuer = audit.IssuerScheduler
		}
		if aerr := e.opts.Audit.Record(context.WithoutCancel(ctx), audit.Event{
			Actor: RoleSyncActor, Issuer: issuer, Action: "deployment.roles.sync", DeploymentID: d.ID,
			Result: audit.ResultError, Reason: cut("the apps' roles were not synced: "+err.Error(), 1024),
		}); aerr != nil {
			e.log.Error("recording a failed role sync", "deployment_id", d.ID, "error", aerr)
		}
	}
	return runs, err
}

func (e *Engine) syncRoles(ctx context.Context, d store.Deployment, actor string) ([]store.Run, error) {
	cat, cfg, err := e.appsOf(ctx, d)
	if err != nil {
		return nil, err
	}
	type syncer struct {
		name   string
		op     app.Operation
		groups []app.RoleGroup
	}
	var syncers []syncer
	names := make([]string, 0, len(cfg.Apps))
	for name, a := range cfg.Apps {
		if a.Enable {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		ops, err := e.commandOperations(ctx, cat, name)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(ops, func(op app.Operation) bool { return op.Name == app.OperationSyncRoles })
		if i < 0 {
			continue
		}
		a, _ := cat.App(name)
		c, err := a.Plugin.Client()
		if err != nil {
			return nil, err
		}
		groups, err := c.App().RoleGroups(ctx)
		if err != nil {
			return nil, err
		}
		syncers = append(syncers, syncer{name: name, op: ops[i], groups: groups})
	}
	if len(syncers) == 0 {
		return nil, nil
	}
	res, pw, err := e.Directory(ctx, d.ID)
	if err != nil {
		var re *Error
		if errors.As(err, &re) && re.Code == CodeNotFound {
			return nil, nil // no directory yet: nobody holds a role
		}
		return nil, err
	}
	dir, err := directory.New(res, pw)
	if err != nil {
		return nil, err
	}
	users, err := dir.Users()
	if err != nil {
		return nil, err
	}
	trigger := store.RunManual
	if actor == RoleSyncActor {
		trigger = store.RunScheduled
	}
	var out []store.Run
	var errs []error
	for _, s := range syncers {
		in := app.RoleSyncInput{Members: roleMembers(users, s.groups)}
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		r, err := e.queueRun(ctx, d, RunRequest{App: s.name, Operation: app.OperationSyncRoles, Input: b, Actor: actor, Trigger: trigger}, s.op, maxRoleSyncInput)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// roleMembers is, by role group, the names of its members who are not disabled, sorted
// (users come sorted by name).
func roleMembers(users []directory.User, groups []app.RoleGroup) map[string][]string {
	out := make(map[string][]string, len(groups))
	for _, g := range groups {
		out[g.Name] = []string{}
	}
	for _, u := range users {
		if u.Disabled {
			continue
		}
		for _, g := range u.Groups {
			if names, ok := out[g]; ok {
				out[g] = append(names, u.Name)
			}
		}
	}
	return out
}

// roleSyncRetry is how long the timer waits after a failed role sync before it runs
// another; each further failure in a row doubles it, up to the interval of a good sync, so
// an app that stays down adds a failed run every hour, not one at every tick.
const roleSyncRetry = time.Minute

func isRoleSync(r store.Run) bool { return r.Operation == app.OperationSyncRoles }

// roleSyncWait is how long after the last role sync, the first of runs (newest first), the
// timer waits: the interval after a good one, roleSyncRetry doubled by each failed one in a
// row before it otherwise.
func roleSyncWait(runs []store.Run, interval time.Duration) time.Duration {
	if runs[0].State == store.RunSucceeded {
		return interval
	}
	wait := min(roleSyncRetry, interval)
	for _, r := range runs[1:] {
		if !isRoleSync(r) {
			continue
		}
		if r.State == store.RunSucceeded || wait >= interval {
			break
		}
		wait *= 2
	}
	return min(wait, interval)
}

// runRoleSyncs is the timer of the role syncs: each active deployment with a directory
// whose last sync succeeded longer than RoleSyncInterval ago, or failed longer than
// roleSyncWait ago, or that has none among its recent runs, gets one.
// tickRoleSyncs is runRoleSyncs on the active deployments with a directory
// (store.DeploymentsWithResource).
func (e *Engine) tickRoleSyncs(ctx context.Context, now time.Time) (int, error) {
	if e.opts.Catalog == nil {
		return 0, nil
	}
	ds, err := e.opts.Store.DeploymentsWithResource(ctx, StateActive, DirectoryResource)
	if err != nil || len(ds) == 0 {
		return 0, err
	}
	return e.runRoleSyncs(ctx, now, ds)
}

func (e *Engine) runRoleSyncs(ctx context.Context, now time.Time, ds []store.Deployment) (int, error) {
	if e.opts.Catalog == nil {
		return 0, nil
	}
	interval := e.opts.RoleSyncInterval
	if interval <= 0 {
		interval = defaultRoleSyncInterval
	}
	queued := 0
	var errs []error
	for _, d := range ds {
		if d.State != StateActive {
			continue
		}
		rows, err := e.opts.Store.Resources(ctx, d.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.ContainsFunc(rows, func(r store.Resource) bool { return r.Name == DirectoryResource && r.App == "" }) {
			continue
		}
		recent, err := e.opts.Store.ListRuns(ctx, d.ID, 50)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if i := slices.IndexFunc(recent, isRoleSync); i >= 0 {
			last := recent[i]
			if !last.State.Finished() || now.Sub(last.CreatedAt) < roleSyncWait(recent[i:], interval) {
				continue
			}
		}
		runs, err := e.SyncRoles(ctx, d.ID, RoleSyncActor)
		queued += len(runs)
		if err != nil {
			e.log.Warn("a role sync was not queued", "deployment_id", d.ID, "error", err)
		}
	}
	return queued, errors.Join(errs...)
}
