package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// upgrade is an app with data that a build moves to another version: its nodes as they
// ran before, and the backup taken of its data while they were stopped.
type upgrade struct {
	versionChange
	snapshot string
	nodes    []store.Resource
}

// RolledBackError is the verdict of a build whose upgrade failed and was undone: the data
// of the old version was restored from the backup taken before the upgrade, and the old
// version runs again.
type RolledBackError struct {
	// Upgrades names each app undone, "<app> <from> to <to>".
	Upgrades []string
	// Snapshots are the backups restored, by app.
	Snapshots map[string]string
	// Cause is why the upgrade failed.
	Cause error
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("the upgrade failed (%v); rolled back %s: the data of the old version is restored from the backup taken before the upgrade, and the old version runs again", e.Cause, joinAnd(e.Upgrades))
}

func (e *RolledBackError) Unwrap() error { return e.Cause }

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := ""
	for i, x := range s {
		switch {
		case i == 0:
			out = x
		case i == len(s)-1:
			out += " and " + x
		default:
			out += ", " + x
		}
	}
	return out
}

// prepareUpgrades stops each app with data that changes version and backs its data up.
// When a backup fails, the upgrade is refused: the app's old nodes start again and the
// build fails, with nothing else changed.
func (r *run) prepareUpgrades(ctx context.Context, changes []versionChange) ([]*upgrade, error) {
	withData := backupApps(r.sorted())
	var out []*upgrade
	for _, ch := range changes {
		if !slices.Contains(withData, ch.App) {
			continue
		}
		u := &upgrade{versionChange: ch}
		for _, row := range r.sorted() {
			if row.App == ch.App && row.Type == contract.Instance && row.State == store.ResourceProvisioned {
				u.nodes = append(u.nodes, row)
			}
		}
		r.event(store.LevelInfo, "upgrade", 6, "stopping %s %s to back up its data before the upgrade to %s", ch.App, ch.From, ch.To)
		if err := r.stopNodes(ctx, ch.App); err != nil {
			return out, r.undoStops(ctx, append(out, u), fmt.Errorf("stopping %s before its upgrade: %w", ch.App, err))
		}
		s, _, err := r.backup(ctx, ch.App, store.BackupUpgrade, map[string]string{"from": ch.From, "to": ch.To})
		if err != nil {
			return out, r.undoStops(ctx, append(out, u), fmt.Errorf("the upgrade of %s from %s to %s is refused: the backup before it failed: %w", ch.App, ch.From, ch.To, err))
		}
		u.snapshot = s.ID
		r.event(store.LevelInfo, "upgrade", 8, "backup %s of %s %s taken before the upgrade", s.ID, ch.App, ch.From)
		out = append(out, u)
	}
	return out, nil
}

// undoStops starts the nodes of upgrades that were stopped, as they were, and returns
// cause, with the failure to start them if there is one.
func (r *run) undoStops(ctx context.Context, ups []*upgrade, cause error) error {
	for _, u := range ups {
		if err := r.startNodes(ctx, u.nodes); err != nil {
			return fmt.Errorf("%w; starting %s %s again failed too: %v", cause, u.App, u.From, err)
		}
	}
	return cause
}

// stopNodes stops the running nodes of an app, keeping their data.
func (r *run) stopNodes(ctx context.Context, app string) error {
	for _, row := range r.sorted() {
		if row.App != app || row.Type != contract.Instance || row.State != store.ResourceProvisioned {
			continue
		}
		if err := r.deprovision(ctx, row, true); err != nil {
			return err
		}
		row.State = store.ResourceStopped
		r.rows[row.Name] = row
		if err := r.e.opts.Store.PutResource(context.WithoutCancel(ctx), row); err != nil {
			return err
		}
	}
	return nil
}

// startNodes provisions nodes again from their recorded requests and checks that they run.
func (r *run) startNodes(ctx context.Context, nodes []store.Resource) error {
	for _, row := range nodes {
		client, provider, err := r.e.route(row.Type)
		if err != nil {
			return err
		}
		res, err := r.provision(ctx, step{App: row.App, Name: row.Name, Type: row.Type, Provider: provider, Spec: json.RawMessage(row.Spec), client: client}, 97)
		if err != nil {
			return err
		}
		var ir contract.InstanceResult
		if err := json.Unmarshal(res, &ir); err != nil || ir.State != "running" {
			return fmt.Errorf("node %s is %s, not running: %s", row.Name, ir.State, ir.Message)
		}
		r.event(store.LevelInfo, "rollback", 98, "node %s is healthy at %s", row.Name, addresses(ir))
	}
	return nil
}

// rollback undoes the upgrades after the build failed with cause: it stops the new
// version, restores the data backed up before the upgrade and starts the old nodes. It
// returns a *RolledBackError when all of it worked, or cause with what went wrong.
func (r *run) rollback(ctx context.Context, ups []*upgrade, cause error) error {
	// The build may have failed because ctx ended; the rollback still has to happen.
	ctx = context.WithoutCancel(ctx)
	rb := &RolledBackError{Snapshots: map[string]string{}, Cause: cause}
	var errs []error
	for _, u := range ups {
		r.event(store.LevelWarn, "rollback", 95, "the upgrade of %s to %s failed: %v; restoring %s %s and its data from backup %s", u.App, u.To, cause, u.App, u.From, u.snapshot)
		if err := r.stopNodes(ctx, u.App); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s %s: %w", u.App, u.To, err))
			continue
		}
		t, db, err := r.target(ctx, u.App, false)
		if err == nil {
			err = backup.Restore(ctx, t, u.snapshot, db, "")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring backup %s of %s: %w", u.snapshot, u.App, err))
			continue
		}
		if err := r.startNodes(ctx, u.nodes); err != nil {
			errs = append(errs, fmt.Errorf("starting %s %s again: %w", u.App, u.From, err))
			continue
		}
		rb.Upgrades = append(rb.Upgrades, fmt.Sprintf("%s %s to %s", u.App, u.From, u.To))
		rb.Snapshots[u.App] = u.snapshot
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w; the rollback failed: %v (restore a backup taken before the upgrade by hand)", cause, errors.Join(errs...))
	}
	return rb
}
