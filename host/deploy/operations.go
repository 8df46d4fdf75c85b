package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// resticSuffix names the secret holding an app's backup repository password; it is kept
// with the backup bucket after a destroy, or the backups could not be read.
const resticSuffix = "-backups-restic"

// snapshotID is a restic snapshot id, short or whole: nothing else reaches restic's
// command line as one.
var snapshotID = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

// Operation asks for an app's operation.
type Operation struct {
	App string `json:"app"`
	// Snapshot is the backup a restore brings back.
	Snapshot string `json:"snapshot,omitempty"`
	// Trigger says who asked for a backup: store.BackupManual, BackupScheduled or
	// BackupUpgrade. Operate sets it; a caller's value is not taken.
	Trigger string `json:"trigger,omitempty"`

	// slot is the scheduled time a scheduled backup takes (see backupSlot): never a
	// caller's, never stored in the build's configuration.
	slot *store.Slot
}

// Operate queues an operation of an app (backup, restore or drill) as a build of the deployment,
// asked for by a person.
func (e *Engine) Operate(ctx context.Context, id, name string, op Operation) (store.Build, error) {
	d, err := e.Deployment(ctx, id)
	if err != nil {
		return store.Build{}, err
	}
	op.Trigger = store.BackupManual
	return e.operate(ctx, d, name, op)
}

func (e *Engine) operate(ctx context.Context, d store.Deployment, name string, op Operation) (store.Build, error) {
	if name != store.OperationBackup && name != store.OperationRestore && name != store.OperationDrill {
		return store.Build{}, refuse(CodeNotFound, "/name", "no such operation: the operations are backup, restore and drill")
	}
	if op.App == "" {
		return store.Build{}, refuse(CodeInvalidConfiguration, "/app", "name the app whose data to %s", name)
	}
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return store.Build{}, err
	}
	if apps := backupApps(rows); !slices.Contains(apps, op.App) {
		// The message lists the apps that qualify instead of the name sent, which may be anything.
		if len(apps) == 0 {
			return store.Build{}, refuse(CodeNotFound, "/app", "no app of this deployment has a database and backups bucket yet, so none has data to %s", name)
		}
		return store.Build{}, refuse(CodeNotFound, "/app", "name an app of this deployment with a database and backups bucket: %s", strings.Join(apps, ", "))
	}
	if name == store.OperationRestore && !snapshotID.MatchString(op.Snapshot) {
		return store.Build{}, refuse(CodeInvalidConfiguration, "/snapshot", "name the backup to restore by its id, 8 to 64 hexadecimal digits (GET .../backups lists them)")
	}
	raw, err := json.Marshal(op)
	if err != nil {
		return store.Build{}, err
	}
	return e.enqueueSlot(ctx, d, name, raw, nil, d.CatalogRevision, op.slot)
}

// Backups lists an app's backups, oldest first.
func (e *Engine) Backups(ctx context.Context, id, app string) ([]backup.Snapshot, error) {
	d, err := e.Deployment(ctx, id)
	if err != nil {
		return nil, err
	}
	r := &run{e: e, d: d}
	if err := r.load(ctx); err != nil {
		return nil, err
	}
	apps := map[string]bool{}
	for _, row := range r.rows {
		apps[row.App] = true
	}
	if !apps[app] {
		if len(apps) == 0 {
			return nil, refuse(CodeNotFound, "/app", "this deployment has no app of that name: it runs no app yet")
		}
		return nil, refuse(CodeNotFound, "/app", "this deployment has no app of that name; its apps are %s", strings.Join(slices.Sorted(maps.Keys(apps)), ", "))
	}
	if _, ok := r.rows[app+resticSuffix]; !ok {
		return []backup.Snapshot{}, nil
	}
	t, _, err := r.target(ctx, app, false)
	if err != nil {
		return nil, err
	}
	list, err := backup.Snapshots(ctx, t)
	if err != nil {
		// The error names the repository and restic's words, never its password or key.
		return nil, refuse(CodeUnavailable, "", "the backups of %s could not be listed: %v; try again later", app, err)
	}
	return list, nil
}

// operate runs a backup, restore or restore drill build.
func (r *run) operate(ctx context.Context, name string) error {
	var op Operation
	if err := json.Unmarshal([]byte(r.build.Config), &op); err != nil {
		return fmt.Errorf("operation: %w", err)
	}
	switch name {
	case store.OperationBackup:
		if op.Trigger == "" {
			op.Trigger = store.BackupManual
		}
		s, t, err := r.backup(ctx, op.App, op.Trigger, nil)
		if err != nil {
			return err
		}
		r.forget(ctx, op.App, t)
		r.event(store.LevelInfo, "verdict", 100, "backup %s of %s taken", s.ID, op.App)
	case store.OperationRestore:
		t, db, err := r.target(ctx, op.App, false)
		if err != nil {
			return err
		}
		r.event(store.LevelInfo, "restore", 10, "restoring backup %s of %s into %s", op.Snapshot, op.App, db.Database)
		if err := backup.Restore(ctx, t, op.Snapshot, db, ""); err != nil {
			return fmt.Errorf("restore of %s: %w", op.App, err)
		}
		r.event(store.LevelInfo, "verdict", 100, "backup %s of %s restored", op.Snapshot, op.App)
	case store.OperationDrill:
		return r.drill(ctx, op.App)
	}
	return nil
}

// backup dumps an app's database and records the attempt and its outcome, whatever
// fails, so that the schedule counts from it and a failure shows. extraTags are added to
// the snapshot's tags.
func (r *run) backup(ctx context.Context, app, trigger string, extraTags map[string]string) (backup.Snapshot, backup.Target, error) {
	st := r.e.opts.Store
	bg := context.WithoutCancel(ctx)
	if err := st.BackupStarted(bg, r.d.ID, app, r.build.ID, trigger, r.e.now()); err != nil {
		return backup.Snapshot{}, backup.Target{}, err
	}
	s, t, err := r.dump(ctx, app, trigger, extraTags)
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	if rerr := st.BackupFinished(bg, r.d.ID, app, s.ID, reason, r.e.now()); rerr != nil {
		r.e.log.Error("recording the end of a backup", "deployment", r.d.ID, "app", app, "error", rerr)
	}
	return s, t, err
}

func (r *run) dump(ctx context.Context, app, trigger string, extraTags map[string]string) (backup.Snapshot, backup.Target, error) {
	t, db, err := r.target(ctx, app, true)
	if err != nil {
		return backup.Snapshot{}, t, fmt.Errorf("backup of %s: %w", app, err)
	}
	r.event(store.LevelInfo, "backup", 10, "dumping %s into the backups bucket (%s backup)", db.Database, trigger)
	tags := backupTags(r.d, app, trigger)
	for k, v := range extraTags {
		tags[k] = v
	}
	s, err := backup.Backup(ctx, t, db, nil, tags)
	if err != nil {
		return s, t, fmt.Errorf("backup of %s: %w", app, err)
	}
	return s, t, nil
}

// forget removes the app's backups older than its retention; a failure is a warning of
// the build, not its verdict: the backup itself is good.
func (r *run) forget(ctx context.Context, app string, t backup.Target) {
	p, _, _ := r.e.backupPolicy(app)
	if err := backup.Forget(ctx, t, p.KeepWithin); err != nil {
		r.event(store.LevelWarn, "retention", 95, "old backups of %s not removed: %v", app, err)
		return
	}
	r.event(store.LevelInfo, "retention", 95, "backups of %s older than %s before the newest are removed", app, p.KeepWithin)
}

// target finds an app's database and backups bucket and the repository's password,
// made on the first backup (create).
func (r *run) target(ctx context.Context, app string, create bool) (backup.Target, *backup.Database, error) {
	var dbRow, bucketRow *store.Resource
	names := make([]string, 0, len(r.rows))
	for name := range r.rows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		row := r.rows[name]
		switch {
		case row.App != app:
		case row.Type == contract.PostgreSQL && dbRow == nil:
			dbRow = &row
		case row.Type == contract.S3 && backupOnly(row.Spec) && bucketRow == nil:
			bucketRow = &row
		}
	}
	if dbRow == nil || bucketRow == nil {
		return backup.Target{}, nil, refuse(CodeConflict, "/app", "app %s has no database and backups bucket in this deployment to back up", app)
	}
	db, err := r.databaseOf(ctx, *dbRow)
	if err != nil {
		return backup.Target{}, nil, err
	}
	var s3 contract.S3Result
	if err := json.Unmarshal([]byte(bucketRow.Result), &s3); err != nil {
		return backup.Target{}, nil, err
	}
	var bucket string
	for _, b := range s3.Buckets {
		bucket = b
	}
	// The app's own key, never an export's read-only one.
	var key contract.S3Access
	for _, name := range slices.Sorted(maps.Keys(s3.Keys)) {
		if name != exportKey {
			key = s3.Keys[name]
			break
		}
	}
	keySecret, err := r.e.reveal(ctx, r.d.Namespace, bucketRow.SecretInstance, key.SecretAccessKey.Secret)
	if err != nil {
		return backup.Target{}, nil, err
	}
	repoPassword, err := r.resticPassword(ctx, app, create)
	if err != nil {
		return backup.Target{}, nil, err
	}
	t := backup.Target{Endpoint: s3.Endpoint, Region: s3.Region, PathStyle: s3.PathStyle, Bucket: bucket,
		AccessKeyID: key.AccessKeyID, SecretAccessKey: string(keySecret), RepositoryPassword: string(repoPassword), Path: app}
	return t, db, nil
}

// database finds an app's database (its first postgresql resource) and its password.
func (r *run) database(ctx context.Context, app string) (*backup.Database, error) {
	names := make([]string, 0, len(r.rows))
	for name := range r.rows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if row := r.rows[name]; row.App == app && row.Type == contract.PostgreSQL {
			return r.databaseOf(ctx, row)
		}
	}
	return nil, refuse(CodeConflict, "/app", "app %s has no database in this deployment to restore into", app)
}

func (r *run) databaseOf(ctx context.Context, row store.Resource) (*backup.Database, error) {
	var pg contract.PostgreSQLResult
	if err := json.Unmarshal([]byte(row.Result), &pg); err != nil {
		return nil, err
	}
	password, err := r.e.reveal(ctx, r.d.Namespace, row.SecretInstance, pg.Password.Secret)
	if err != nil {
		return nil, err
	}
	return &backup.Database{Host: pg.Host, Port: pg.Port, Database: pg.Database, User: pg.User, Password: string(password), SSLMode: pg.SSLMode}, nil
}

// resticPassword reveals the app's repository password, generating it at the first backup.
func (r *run) resticPassword(ctx context.Context, app string, create bool) ([]byte, error) {
	name := app + resticSuffix
	if _, ok := r.rows[name]; !ok && create {
		c, provider, err := r.e.route(contract.Secret)
		if err != nil {
			return nil, err
		}
		spec, _ := json.Marshal(contract.SecretRequest{Files: map[string]contract.SecretFile{
			"password": {Generate: &contract.Generate{Length: 32, Encoding: "base64url"}},
		}})
		if _, err := r.provision(ctx, step{App: app, Name: name, Request: "backups-restic", Type: contract.Secret, Provider: provider, Spec: spec, client: c}, 5); err != nil {
			return nil, err
		}
	}
	row, ok := r.rows[name]
	if !ok {
		return nil, refuse(CodeNotFound, "/app", "app %s has no backups yet", app)
	}
	var sr contract.SecretResult
	if err := json.Unmarshal([]byte(row.Result), &sr); err != nil {
		return nil, err
	}
	return r.e.reveal(ctx, r.d.Namespace, name, sr.Files["password"].Ref)
}
