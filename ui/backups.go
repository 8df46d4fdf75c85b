package ui

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// The operations of the backup pages are recorded under the action of the API's
// POST /api/v1/deployments/:id/operations/:name; the build says which one it was.
const operationAction = "deployment.operation"

// backupStatuses is where the backups of d's apps stand, or why that could not be read:
// the deployment page shows the rest of the deployment either way.
func (u *UI) backupStatuses(ctx context.Context, d store.Deployment) ([]deploy.BackupStatus, string) {
	list, err := u.d.Engine.BackupStatuses(ctx, d)
	if err != nil {
		return nil, err.Error()
	}
	return list, ""
}

// backupApp returns the backup status of app in d; ok is false when app keeps no data
// to back up there.
func (u *UI) backupApp(ctx context.Context, d store.Deployment, app string) (deploy.BackupStatus, bool, error) {
	list, err := u.d.Engine.BackupStatuses(ctx, d)
	if err != nil {
		return deploy.BackupStatus{}, false, err
	}
	for _, s := range list {
		if s.App == app {
			return s, true, nil
		}
	}
	return deploy.BackupStatus{}, false, nil
}

func (u *UI) noBackupApp(c *fiber.Ctx, s *session) error {
	return u.refusal(c, s, fiber.StatusNotFound, "Not found",
		"This deployment has no app of that name with data to back up. Go back to the deployment and choose an app from its Backups section.")
}

// snapshotID is what a restic snapshot id looks like: hexadecimal, its short form or whole.
var snapshotID = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

type backupsData struct {
	D      store.Deployment
	Status deploy.BackupStatus
	// Snapshots are the app's backups, newest first.
	Snapshots []backup.Snapshot
	// Unlisted is set when the backups could not be listed.
	Unlisted bool
	Running  bool
	// StaleHours is how old the last good backup of a stale app is at least.
	StaleHours int
}

// running says whether a build of the deployment is queued or running.
func (u *UI) running(ctx context.Context, id string) (bool, error) {
	builds, err := u.d.Store.ListBuilds(ctx, id, 1)
	if err != nil {
		return false, err
	}
	return len(builds) > 0 && !builds[0].State.Finished(), nil
}

// backups lists an app's backups, each with a way to restore it. Listing asks the
// backup repository (about a second), so only this page does, not the deployment page.
func (u *UI) backups(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	app := c.Params("app")
	status, ok, err := u.backupApp(s.ctx, d, app)
	if err != nil {
		return err
	}
	if !ok {
		return u.noBackupApp(c, s)
	}
	data := backupsData{D: d, Status: status, StaleHours: int(deploy.StaleAfter.Hours())}
	if data.Running, err = u.running(s.ctx, d.ID); err != nil {
		return err
	}
	code, message := fiber.StatusOK, ""
	list, err := u.snapshots(s.ctx, d.ID, app)
	if err != nil {
		var de *deploy.Error
		data.Unlisted = true
		switch {
		case errors.As(err, &de) && de.Code == deploy.CodeUnavailable:
			// The repository did not answer: say so on the page, which still backs up.
			code = fiber.StatusServiceUnavailable
			message = strings.ToUpper(de.Message[:1]) + de.Message[1:] + ". If it keeps failing, tell your hosting provider."
		case de != nil:
			code = fiber.StatusConflict
			message = "The backups could not be listed: " + messageOf(err) + "."
		default:
			code = fiber.StatusServiceUnavailable
			message = "The backups could not be listed: " + messageOf(err) + ". Reload the page to try again; if it keeps failing, tell your hosting provider."
		}
	}
	data.Snapshots = slices.Clone(list)
	slices.SortStableFunc(data.Snapshots, func(a, b backup.Snapshot) int { return b.Time.Compare(a.Time) })
	v := u.view(s, "Backups of "+app+" in "+d.Name, "deployments", data)
	v.Error = message
	return u.render(c, code, "backups", v)
}

// messageOf is an error's text without a trailing full stop, to end a sentence of a page.
func messageOf(err error) string {
	var de *deploy.Error
	if errors.As(err, &de) {
		return strings.TrimSuffix(de.Message, ".")
	}
	return strings.TrimSuffix(err.Error(), ".")
}

// backUp queues a backup of an app now and shows its build.
func (u *UI) backUp(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), operationAction)
	if err != nil {
		return err
	}
	app := c.Params("app")
	if _, ok, err := u.backupApp(s.ctx, d, app); err != nil {
		return err
	} else if !ok {
		if err := u.record(s.ctx, audit.Event{Action: operationAction, DeploymentID: d.ID, Result: audit.ResultInvalid, Reason: "/app"}); err != nil {
			return err
		}
		return u.noBackupApp(c, s)
	}
	b, err := u.d.Engine.Operate(s.ctx, d.ID, store.OperationBackup, deploy.Operation{App: app})
	return u.queued(c, s, d, operationAction, b, err, func(de *deploy.Error) error {
		return u.showDeployment(c, s, d, fiber.StatusConflict, "The backup of "+app+" was not queued: "+messageOf(de)+".")
	})
}

// drill queues a restore drill of an app now and shows its build.
func (u *UI) drill(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), operationAction)
	if err != nil {
		return err
	}
	app := c.Params("app")
	if st, ok, err := u.backupApp(s.ctx, d, app); err != nil {
		return err
	} else if !ok || st.LastSuccessAt == nil {
		if err := u.record(s.ctx, audit.Event{Action: operationAction, DeploymentID: d.ID, Result: audit.ResultInvalid, Reason: "/app"}); err != nil {
			return err
		}
		return u.noBackupApp(c, s)
	}
	b, err := u.d.Engine.Operate(s.ctx, d.ID, store.OperationDrill, deploy.Operation{App: app})
	return u.queued(c, s, d, operationAction, b, err, func(de *deploy.Error) error {
		return u.showDeployment(c, s, d, fiber.StatusConflict, "The restore drill of "+app+" was not queued: "+messageOf(de)+".")
	})
}

type restoreData struct {
	D        store.Deployment
	App      string
	Snapshot backup.Snapshot
	// Listed is set when Snapshot was found in the repository, with its time and tags.
	Listed  bool
	Running bool
	// Unconfirmed is set when the form came back without the confirmation.
	Unconfirmed bool
}

// restorePage asks to confirm a restore: it overwrites the app's data.
func (u *UI) restorePage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	app, id := c.Params("app"), c.Params("snapshot")
	if _, ok, err := u.backupApp(s.ctx, d, app); err != nil {
		return err
	} else if !ok {
		return u.noBackupApp(c, s)
	}
	list, err := u.snapshots(s.ctx, d.ID, app)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(list, func(x backup.Snapshot) bool { return x.ID == id })
	if i < 0 {
		return u.refusal(c, s, fiber.StatusNotFound, "No such backup",
			"App "+app+" has no backup "+id+" (any more): choose one from the list of its backups.")
	}
	data := restoreData{D: d, App: app, Snapshot: list[i], Listed: true}
	if data.Running, err = u.running(s.ctx, d.ID); err != nil {
		return err
	}
	return u.render(c, fiber.StatusOK, "restore", u.view(s, "Restore "+app+" of "+d.Name, "deployments", data))
}

// restore queues the restore of a backup once the form confirms that the app's data
// since the backup is lost.
func (u *UI) restore(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), operationAction)
	if err != nil {
		return err
	}
	app, id := c.Params("app"), c.Params("snapshot")
	if _, ok, err := u.backupApp(s.ctx, d, app); err != nil {
		return err
	} else if !ok {
		if err := u.record(s.ctx, audit.Event{Action: operationAction, DeploymentID: d.ID, Result: audit.ResultInvalid, Reason: "/app"}); err != nil {
			return err
		}
		return u.noBackupApp(c, s)
	}
	data := restoreData{D: d, App: app, Snapshot: backup.Snapshot{ID: id}}
	show := func(status int, message string) error {
		// The page again, with the backup's time if the repository answers.
		if list, err := u.snapshots(s.ctx, d.ID, app); err == nil {
			if i := slices.IndexFunc(list, func(x backup.Snapshot) bool { return x.ID == id }); i >= 0 {
				data.Snapshot, data.Listed = list[i], true
			}
		}
		v := u.view(s, "Restore "+app+" of "+d.Name, "deployments", data)
		v.Error = message
		return u.render(c, status, "restore", v)
	}
	if !snapshotID.MatchString(id) {
		if err := u.record(s.ctx, audit.Event{Action: operationAction, DeploymentID: d.ID, Result: audit.ResultInvalid, Reason: "/snapshot"}); err != nil {
			return err
		}
		return u.refusal(c, s, fiber.StatusNotFound, "No such backup", "This is not the id of a backup: choose one from the list of the app's backups.")
	}
	if c.FormValue("confirm") != "yes" {
		if err := u.record(s.ctx, audit.Event{Action: operationAction, DeploymentID: d.ID, Result: audit.ResultInvalid, Reason: "/confirm"}); err != nil {
			return err
		}
		data.Unconfirmed = true
		return show(fiber.StatusBadRequest, "Nothing was restored: tick the box to confirm that the data since this backup is lost.")
	}
	b, err := u.d.Engine.Operate(s.ctx, d.ID, store.OperationRestore, deploy.Operation{App: app, Snapshot: id})
	return u.queued(c, s, d, operationAction, b, err, func(de *deploy.Error) error {
		var err error
		if data.Running, err = u.running(s.ctx, d.ID); err != nil {
			return err
		}
		return show(fiber.StatusConflict, "Nothing was restored: "+messageOf(de)+".")
	})
}

// retention says how long backups are kept, in days when it is whole days.
func retention(hours int) string {
	switch {
	case hours == 24:
		return "1 day"
	case hours > 0 && hours%24 == 0:
		return fmt.Sprintf("%d days", hours/24)
	case hours == 1:
		return "1 hour"
	}
	return fmt.Sprintf("%d hours", hours)
}

// relative says how long ago t was, or how soon it comes, in its largest whole unit.
func relative(t time.Time) string {
	d := time.Since(t)
	future := d < 0
	if future {
		d = -d
	}
	var n int
	var unit string
	switch {
	case d < time.Minute:
		if future {
			return "in a moment"
		}
		return "just now"
	case d < time.Hour:
		n, unit = int(d/time.Minute), "minute"
	case d < 48*time.Hour:
		n, unit = int(d/time.Hour), "hour"
	default:
		n, unit = int(d/(24*time.Hour)), "day"
	}
	if n != 1 {
		unit += "s"
	}
	if future {
		return fmt.Sprintf("in %d %s", n, unit)
	}
	return fmt.Sprintf("%d %s ago", n, unit)
}

// shortSnapshot is the short form of a restic snapshot id: its first 8 characters.
func shortSnapshot(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
