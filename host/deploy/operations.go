package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// resticSuffix names the secret holding an app's backup repository password; it is kept
// with the backup bucket after a destroy, or the backups could not be read.
const resticSuffix = "-backups-restic"

// Operation asks for an app's operation.
type Operation struct {
	App string `json:"app"`
	// Snapshot is the backup a restore brings back.
	Snapshot string `json:"snapshot,omitempty"`
}

// Operate queues an operation of an app (backup or restore) as a build of the deployment.
func (e *Engine) Operate(ctx context.Context, id, name string, op Operation) (store.Build, error) {
	d, err := e.Deployment(ctx, id)
	if err != nil {
		return store.Build{}, err
	}
	if name != store.OperationBackup && name != store.OperationRestore {
		return store.Build{}, refuse(CodeNotFound, "/name", "no operation %q: the operations are backup and restore", name)
	}
	if op.App == "" {
		return store.Build{}, refuse(CodeInvalidConfiguration, "/app", "name the app whose data to %s", name)
	}
	if name == store.OperationRestore && op.Snapshot == "" {
		return store.Build{}, refuse(CodeInvalidConfiguration, "/snapshot", "name the backup to restore (GET .../backups lists them)")
	}
	raw, err := json.Marshal(op)
	if err != nil {
		return store.Build{}, err
	}
	return e.enqueue(ctx, d, name, raw, nil, d.CatalogRevision)
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
	if _, ok := r.rows[app+resticSuffix]; !ok {
		return []backup.Snapshot{}, nil
	}
	t, _, err := r.target(ctx, app, false)
	if err != nil {
		return nil, err
	}
	return backup.Snapshots(ctx, t)
}

// operate runs a backup or a restore build.
func (r *run) operate(ctx context.Context, name string) error {
	var op Operation
	if err := json.Unmarshal([]byte(r.build.Config), &op); err != nil {
		return fmt.Errorf("operation: %w", err)
	}
	t, db, err := r.target(ctx, op.App, name == store.OperationBackup)
	if err != nil {
		return err
	}
	switch name {
	case store.OperationBackup:
		r.event(store.LevelInfo, "backup", 10, "dumping %s into the backups bucket", db.Database)
		s, err := backup.Backup(ctx, t, db, nil, map[string]string{"deployment": r.d.Namespace, "app": op.App})
		if err != nil {
			return fmt.Errorf("backup of %s: %w", op.App, err)
		}
		r.event(store.LevelInfo, "verdict", 100, "backup %s of %s taken", s.ID, op.App)
	case store.OperationRestore:
		r.event(store.LevelInfo, "restore", 10, "restoring backup %s of %s into %s", op.Snapshot, op.App, db.Database)
		if err := backup.Restore(ctx, t, op.Snapshot, db, ""); err != nil {
			return fmt.Errorf("restore of %s: %w", op.App, err)
		}
		r.event(store.LevelInfo, "verdict", 100, "backup %s of %s restored", op.Snapshot, op.App)
	}
	return nil
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
	var pg contract.PostgreSQLResult
	var s3 contract.S3Result
	if err := errors.Join(json.Unmarshal([]byte(dbRow.Result), &pg), json.Unmarshal([]byte(bucketRow.Result), &s3)); err != nil {
		return backup.Target{}, nil, err
	}
	password, err := r.e.reveal(ctx, r.d.Namespace, dbRow.SecretInstance, pg.Password.Secret)
	if err != nil {
		return backup.Target{}, nil, err
	}
	var bucket string
	for _, b := range s3.Buckets {
		bucket = b
	}
	var key contract.S3Access
	for _, k := range s3.Keys {
		key = k
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
	db := &backup.Database{Host: pg.Host, Port: pg.Port, Database: pg.Database, User: pg.User, Password: string(password), SSLMode: pg.SSLMode}
	return t, db, nil
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
