package deploy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// StateExported is a deployment exported to another fedhost: its nodes are stopped (it
// is suspended), its final snapshots readable with the export's read-only keys.
const StateExported = "exported"

// exportKey names the read-only key an export adds to an app's backups s3 request.
const exportKey = "export-read"

// ExportTTL is how long a migration string, and the read-only keys in it, live.
const ExportTTL = 7 * 24 * time.Hour

// exportWait bounds how long Export waits for its build.
const exportWait = 30 * time.Minute

// confirmWait bounds how long a confirmation waits for its revoke-export build before it
// answers "confirming": below the target's confirmTimeout (importbuild.go), so the
// target hears the answer.
const confirmWait = 25 * time.Second

// recipientTimeout bounds asking a target for its recipient; maxRecipientAnswer its answer.
const (
	recipientTimeout   = 10 * time.Second
	maxRecipientAnswer = 8 << 10
)

// exportOp is an export build's configuration: nothing secret, the token only by its
// digest.
type exportOp struct {
	ID        string    `json:"id"`
	TokenHash string    `json:"token_hash"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PublicURLWarning warns of an export whose source URL is the request's own address,
// public_url not being set.
const PublicURLWarning = "public_url is not set: the migration string's source URL, where the target confirms the import, is the address this page was asked at; if the target cannot reach it, set public_url (FEDHOST_PUBLIC_URL, --public-url) to the URL other fedhosts reach this one at"

// revokeOp is a revoke-export build's configuration: the export whose read-only keys it
// takes back, and the move of its state (confirming to confirmed, exported to revoked).
type revokeOp struct {
	ID   string `json:"id"`
	From string `json:"from"`
	To   string `json:"to"`
	// Why says what asked for it, for the build's log: confirmed, expired, resumed or
	// unsealed.
	Why string `json:"why"`
}

// Exported is the answer of an export: the build that ran it and the migration string,
// which exists nowhere else.
type Exported struct {
	Build     store.Build
	ExportID  string
	ExpiresAt time.Time
	String    string
}

// Export moves a deployment out: it releases the domain when this host's registrar holds
// it, queues the export build (stop the nodes, take a final backup of each app, mint the
// read-only keys, record the export, mark the deployment exported) and waits for it,
// then seals the migration string to recipient. sourceURL is this fedhost's public URL,
// where the target confirms the import.
func (e *Engine) Export(ctx context.Context, id, recipient, sourceURL string) (Exported, error) {
	d, err := e.Deployment(ctx, id)
	if err != nil {
		return Exported{}, err
	}
	if d.State == StateExported {
		return Exported{}, refuse(CodeConflict, "", "deployment %s is exported already: resume it to bring it back, then export it again", d.ID)
	}
	if d.State == StateDestroyed || d.State == StateNew {
		return Exported{}, refuse(CodeConflict, "", "deployment %s is %s: only a deployed deployment can be exported", d.ID, d.State)
	}
	if _, err := migration.ParseRecipient(recipient); err != nil {
		return Exported{}, refuse(CodeInvalidConfiguration, "/recipient", "the recipient is not a post-quantum age recipient (age1pq1...): copy it from the target's GET /api/v1/migration/recipient")
	}
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return Exported{}, err
	}
	if len(backupApps(rows)) == 0 {
		return Exported{}, refuse(CodeConflict, "", "deployment %s has no app with a database and backups bucket: there is no data to export", d.ID)
	}

	// The domain first: a registrar that fails stops nothing.
	var release *Release
	if rec, err := e.opts.Store.DeploymentDomain(ctx, d.ID); err == nil && rec.Mode == store.DomainRegistered && rec.State != DomainConfirmed && rec.State != DomainRefused {
		rel, err := e.ReleaseDomain(ctx, rec.Name)
		if err != nil {
			return Exported{}, fmt.Errorf("export: releasing the domain (nothing was stopped): %w", err)
		}
		release = &rel
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Exported{}, err
	}
	relock := func(cause error) error {
		if release == nil || !release.Unlocked {
			return cause
		}
		if err := e.lockDomain(context.WithoutCancel(ctx), release.Domain); err != nil {
			return fmt.Errorf("%w; locking domain %s again failed too: %v", cause, release.Domain, err)
		}
		return cause
	}

	token := randomText(32)
	op := exportOp{ID: hex.EncodeToString(randomBytes(16)), TokenHash: tokenDigest(token), ExpiresAt: e.now().Add(ExportTTL).UTC().Truncate(time.Second)}
	raw, _ := json.Marshal(op)
	b, err := e.enqueue(ctx, d, store.OperationExport, raw, nil, d.CatalogRevision)
	if err != nil {
		return Exported{}, relock(err)
	}
	done, err := e.waitBuild(ctx, b.ID, exportWait)
	if err != nil {
		return Exported{Build: b}, relock(err)
	}
	if done.State != store.BuildSucceeded {
		return Exported{Build: done}, relock(refuse(CodeConflict, "", "the export failed and the apps run again: %s", done.Reason))
	}
	s, err := e.seal(ctx, d, op, token, release, recipient, sourceURL)
	if err != nil {
		// The keys are minted but the string could not be made: take them back.
		if _, _, rerr := e.revoke(context.WithoutCancel(ctx), op.ID, store.ExportExported, store.ExportRevoked, "unsealed", confirmWait); rerr != nil {
			e.log.Error("revoking the keys of an export whose string could not be made", "deployment", d.ID, "export", op.ID, "error", rerr)
		}
		return Exported{Build: done}, relock(fmt.Errorf("export: sealing the migration string: %w; resume the deployment to bring it back", err))
	}
	return Exported{Build: done, ExportID: op.ID, ExpiresAt: op.ExpiresAt, String: s}, nil
}

// waitBuild polls a build until it finishes (on whichever host of the cluster it runs),
// for at most wait.
func (e *Engine) waitBuild(ctx context.Context, id string, wait time.Duration) (store.Build, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := e.opts.Store.GetBuild(ctx, id)
		if err != nil {
			return b, err
		}
		if b.State.Finished() {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return b, fmt.Errorf("build %s has not finished: follow it at GET /api/v1/builds/%s", id, id)
		case <-t.C:
		}
	}
}

// seal reveals what the string carries and encrypts it to recipient.
func (e *Engine) seal(ctx context.Context, d store.Deployment, op exportOp, token string, release *Release, recipient, sourceURL string) (string, error) {
	d, err := e.opts.Store.GetDeployment(ctx, d.ID)
	if err != nil {
		return "", err
	}
	x, err := e.opts.Store.GetExport(ctx, op.ID)
	if err != nil {
		return "", err
	}
	apps, err := x.AppsOf()
	if err != nil {
		return "", err
	}
	r := &run{e: e, d: d}
	if err := r.load(ctx); err != nil {
		return "", err
	}
	cat, err := e.catalogAt(ctx, d.CatalogRevision)
	if err != nil {
		return "", err
	}
	p := migration.Payload{ID: op.ID, CreatedAt: e.now().UTC(), ExpiresAt: op.ExpiresAt,
		Source:          migration.Source{URL: sourceURL, ConfirmToken: token},
		Deployment:      migration.Deployment{ID: d.ID, Name: d.Name, Namespace: d.Namespace},
		CatalogRevision: d.CatalogRevision, Versions: map[string]string{}, Config: json.RawMessage(d.Config),
		Apps: map[string]migration.AppData{}, Domain: migration.Domain{Name: d.Domain}}
	if cfg, err := catalog.ParseConfig(json.RawMessage(d.Config)); err == nil {
		for name, a := range cfg.Apps {
			if app, ok := cat.App(name); ok && a.Enable {
				p.Versions[name] = app.Version
			}
		}
	}
	refs := e.storedRefs(d)
	if len(refs) > 0 {
		p.Secrets = map[string]string{}
		for pointer, ref := range refs {
			v, err := e.reveal(ctx, d.Namespace, operatorInstance, ref)
			if err != nil {
				return "", fmt.Errorf("the operator's secret at %s: %w", pointer, err)
			}
			p.Secrets[pointer] = string(v)
		}
	}
	if release != nil {
		p.Domain.Registered, p.Domain.AuthCode = true, release.AuthCode
	}
	if p.Directory, err = e.exportDirectory(ctx, d.ID); err != nil {
		return "", err
	}
	for _, app := range slices.Sorted(maps.Keys(apps)) {
		a := apps[app]
		t, _, err := r.target(ctx, app, false)
		if err != nil {
			return "", err
		}
		row, s3, err := r.backupBucket(app)
		if err != nil {
			return "", err
		}
		key, ok := s3.Keys[a.Key]
		if !ok {
			return "", fmt.Errorf("the backups bucket of %s has no key %s", app, a.Key)
		}
		secret, err := e.reveal(ctx, d.Namespace, row.SecretInstance, key.SecretAccessKey.Secret)
		if err != nil {
			return "", err
		}
		p.Apps[app] = migration.AppData{Version: p.Versions[app], RepositoryPassword: t.RepositoryPassword, Snapshot: a.Snapshot,
			S3: migration.S3{Endpoint: t.Endpoint, Region: t.Region, PathStyle: t.PathStyle, Bucket: t.Bucket, Path: t.Path,
				AccessKeyID: key.AccessKeyID, SecretAccessKey: string(secret)}}
	}
	return migration.Seal(p, recipient)
}

// exportDirectory reads the deployment's users, with the password hashes their directory
// stored, and its groups; nil for a deployment without a directory.
func (e *Engine) exportDirectory(ctx context.Context, deploymentID string) (*migration.Directory, error) {
	res, pw, err := e.Directory(ctx, deploymentID)
	var de *Error
	if errors.As(err, &de) && de.Code == CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the directory's users: %w", err)
	}
	dir, err := directory.New(res, pw)
	if err != nil {
		return nil, err
	}
	users, hashes, err := dir.UsersWithHashes()
	if err != nil {
		return nil, fmt.Errorf("the directory's users: %w", err)
	}
	groups, err := dir.Groups()
	if err != nil {
		return nil, fmt.Errorf("the directory's groups: %w", err)
	}
	out := &migration.Directory{Users: make([]migration.User, 0, len(users)), Groups: make([]migration.Group, 0, len(groups))}
	for _, u := range users {
		out.Users = append(out.Users, migration.User{Name: u.Name, DisplayName: u.DisplayName, Email: u.Email, Disabled: u.Disabled, PasswordHash: hashes[u.Name]})
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, migration.Group{Name: g.Name, Members: append([]string{}, g.Members...)})
	}
	return out, nil
}

// export runs an export build: stop the nodes, back up each app, mint the read-only keys
// and record the export. Whatever fails, the nodes start again and the minted keys are
// removed, and the error says which step and app.
func (r *run) export(ctx context.Context) error {
	var op exportOp
	if err := json.Unmarshal([]byte(r.build.Config), &op); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	rows := r.sorted()
	apps := backupApps(rows)
	var nodes []store.Resource
	for _, row := range rows {
		if row.Type == contract.Instance && row.State == store.ResourceProvisioned {
			nodes = append(nodes, row)
		}
	}
	var minted []string
	undo := func(cause error) error {
		ctx := context.WithoutCancel(ctx)
		var errs []error
		for _, app := range minted {
			if err := r.setExportKey(ctx, app, false); err != nil {
				errs = append(errs, fmt.Errorf("removing the read-only key of %s: %w", app, err))
			}
		}
		if err := r.startNodes(ctx, nodes); err != nil {
			errs = append(errs, fmt.Errorf("starting the nodes again: %w", err))
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w; then %w", cause, errors.Join(errs...))
		}
		r.event(store.LevelInfo, "rollback", 99, "the nodes run again; nothing is exported")
		return cause
	}

	started := time.Now()
	for _, app := range slices.Sorted(maps.Keys(appsOf(nodes))) {
		if err := r.stopNodes(ctx, app); err != nil {
			return undo(fmt.Errorf("export: stopping the nodes of %s: %w", app, err))
		}
	}
	r.event(store.LevelInfo, "export", 20, "the nodes are stopped (%s)", time.Since(started).Round(time.Millisecond))
	out := map[string]store.ExportApp{}
	for _, app := range apps {
		started := time.Now()
		s, _, err := r.backup(ctx, app, store.BackupExport, map[string]string{"export": op.ID})
		if err != nil {
			return undo(fmt.Errorf("export: the final backup of %s: %w", app, err))
		}
		r.event(store.LevelInfo, "export", 50, "final backup %s of %s taken (%s)", s.ID, app, time.Since(started).Round(time.Millisecond))
		out[app] = store.ExportApp{Snapshot: s.ID, Key: exportKey}
	}
	for _, app := range apps {
		started := time.Now()
		minted = append(minted, app)
		if err := r.setExportKey(ctx, app, true); err != nil {
			return undo(fmt.Errorf("export: the read-only key of %s: %w", app, err))
		}
		r.event(store.LevelInfo, "export", 80, "read-only key to the backups of %s made (%s)", app, time.Since(started).Round(time.Millisecond))
	}
	if _, err := r.e.opts.Store.CreateExport(context.WithoutCancel(ctx), op.ID, r.d.ID, op.TokenHash, out, op.ExpiresAt); err != nil {
		return undo(fmt.Errorf("export: recording it: %w", err))
	}
	r.event(store.LevelInfo, "verdict", 100, "exported %s: the nodes are stopped, the final backups readable until %s", strings.Join(apps, ", "), op.ExpiresAt.Format(time.RFC3339))
	return nil
}

func appsOf(rows []store.Resource) map[string]bool {
	out := map[string]bool{}
	for _, row := range rows {
		out[row.App] = true
	}
	return out
}

// backupBucket returns an app's backups bucket and its result.
func (r *run) backupBucket(app string) (store.Resource, contract.S3Result, error) {
	for _, row := range r.sorted() {
		if row.App == app && row.Type == contract.S3 && backupOnly(row.Spec) {
			var res contract.S3Result
			if err := json.Unmarshal([]byte(row.Result), &res); err != nil {
				return row, res, err
			}
			return row, res, nil
		}
	}
	return store.Resource{}, contract.S3Result{}, refuse(CodeConflict, "/app", "app %s has no backups bucket", app)
}

// setExportKey provisions an app's backups bucket with (add) or without the export's
// read-only key.
func (r *run) setExportKey(ctx context.Context, app string, add bool) error {
	row, _, err := r.backupBucket(app)
	if err != nil {
		return err
	}
	var req contract.S3Request
	if err := json.Unmarshal([]byte(row.Spec), &req); err != nil {
		return err
	}
	if req.Keys == nil {
		req.Keys = map[string]contract.S3Key{}
	}
	_, had := req.Keys[exportKey]
	if add == had {
		return nil
	}
	if add {
		grants := map[string]string{}
		for bucket := range req.Buckets {
			grants[bucket] = "read"
		}
		req.Keys[exportKey] = contract.S3Key{Grants: grants}
	} else {
		delete(req.Keys, exportKey)
	}
	spec, err := json.Marshal(req)
	if err != nil {
		return err
	}
	client, provider, err := r.e.route(row.Type)
	if err != nil {
		return err
	}
	_, err = r.provision(ctx, step{App: row.App, Name: row.Name, Type: row.Type, Provider: provider, Spec: spec, client: client}, 85)
	return err
}

// ConfirmExport is the target's word that the import is done: the token of the string
// proves it. The export becomes confirming and a revoke-export build takes the read-only
// keys back; the answer waits for it up to confirmWait and is the export in state
// confirmed, or still confirming when the build has not finished (the scheduler's tick
// submits it again until it succeeds). A wrong id or token is not found, and says no
// more.
func (e *Engine) ConfirmExport(ctx context.Context, id, token string) (store.Export, error) {
	notFound := refuse(CodeNotFound, "", "no such export")
	if len(id) > 64 || len(token) > 128 {
		return store.Export{}, notFound
	}
	x, err := e.opts.Store.GetExport(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Export{}, notFound
	}
	if err != nil {
		return store.Export{}, err
	}
	if subtle.ConstantTimeCompare([]byte(tokenDigest(token)), []byte(x.TokenHash)) != 1 {
		return store.Export{}, notFound
	}
	if x.State == store.ExportExported {
		if _, err := e.opts.Store.FinishExport(ctx, x.ID, store.ExportExported, store.ExportConfirming); err != nil {
			return x, err
		}
		// Of two confirmations, or a confirmation and the expiry, one moved it: read
		// which.
		if x, err = e.opts.Store.GetExport(ctx, id); err != nil {
			return x, err
		}
	}
	if x.State != store.ExportConfirming {
		// Confirmed twice, or after the expiry: the keys are gone already.
		return x, nil
	}
	_, done, err := e.revoke(ctx, x.ID, store.ExportConfirming, store.ExportConfirmed, "confirmed", confirmWait)
	var de *Error
	if errors.As(err, &de) && (de.Code == CodeConflict || de.Code == CodeQueueFull) {
		// Another build of the deployment runs: the tick revokes after it.
		return x, nil
	}
	if err != nil || !done {
		e.log.Warn("an export's confirmation is recorded, its keys not revoked yet: the tick tries again", "export", x.ID, "deployment", x.DeploymentID, "error", err)
		return x, nil
	}
	return e.opts.Store.GetExport(ctx, id)
}

// revoke queues the revoke-export build that moves export id from state from to state to,
// and waits for it up to wait (not at all for 0). done says it finished; its state says
// how.
func (e *Engine) revoke(ctx context.Context, id, from, to, why string, wait time.Duration) (store.Build, bool, error) {
	x, err := e.opts.Store.GetExport(ctx, id)
	if err != nil {
		return store.Build{}, false, err
	}
	d, err := e.opts.Store.GetDeployment(ctx, x.DeploymentID)
	if err != nil {
		return store.Build{}, false, err
	}
	raw, err := json.Marshal(revokeOp{ID: id, From: from, To: to, Why: why})
	if err != nil {
		return store.Build{}, false, err
	}
	b, err := e.enqueue(ctx, d, store.OperationRevokeExport, raw, nil, d.CatalogRevision)
	if err != nil || wait == 0 {
		return b, false, err
	}
	done, err := e.waitBuild(ctx, b.ID, wait)
	if err != nil || !done.State.Finished() {
		// Queued or running still: whoever asked answers so, the build goes on.
		if done.ID == "" {
			done = b
		}
		return done, false, nil
	}
	return done, true, nil
}

// revokeExport runs a revoke-export build: the export's backups buckets are provisioned
// without the read-only keys, then its state moves. An export no longer in the state
// the build was asked from was moved by another (a confirmation, the expiry, a resume):
// there is nothing left for this build to do.
func (r *run) revokeExport(ctx context.Context) error {
	var op revokeOp
	if err := json.Unmarshal([]byte(r.build.Config), &op); err != nil {
		return fmt.Errorf("revoke-export: %w", err)
	}
	x, err := r.e.opts.Store.GetExport(ctx, op.ID)
	if err != nil {
		return fmt.Errorf("revoke-export: %w", err)
	}
	if x.State != op.From {
		r.event(store.LevelInfo, "verdict", 100, "export %s is %s already: nothing to revoke", x.ID, x.State)
		return nil
	}
	apps, err := x.AppsOf()
	if err != nil {
		return err
	}
	r.event(store.LevelInfo, "revoke", 10, "taking back the read-only keys of export %s (%s)", x.ID, bounded(op.Why, 16))
	for _, app := range slices.Sorted(maps.Keys(apps)) {
		if err := r.setExportKey(ctx, app, false); err != nil {
			return fmt.Errorf("revoke-export: the read-only key of %s: %w", app, err)
		}
	}
	if _, err := r.e.opts.Store.FinishExport(context.WithoutCancel(ctx), x.ID, op.From, op.To); err != nil {
		return fmt.Errorf("revoke-export: %w", err)
	}
	r.event(store.LevelInfo, "verdict", 100, "the read-only keys of export %s are revoked: it is %s", x.ID, op.To)
	return nil
}

// runExportExpiry queues the revoke-export builds of the exports due: confirmed by their
// target but not revoked yet (a revoke that failed is tried again here), or past their
// expiry. A deployment with a build running is left to the next tick.
func (e *Engine) runExportExpiry(ctx context.Context, now time.Time) error {
	xs, err := e.opts.Store.DueExports(ctx, now)
	if err != nil {
		return err
	}
	var errs []error
	for _, x := range xs {
		to, why := store.ExportRevoked, "expired"
		if x.State == store.ExportConfirming {
			to, why = store.ExportConfirmed, "confirmed"
		}
		b, _, err := e.revoke(ctx, x.ID, x.State, to, why, 0)
		var de *Error
		if errors.As(err, &de) && (de.Code == CodeConflict || de.Code == CodeQueueFull) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("export %s of deployment %s: %w", x.ID, x.DeploymentID, err))
			continue
		}
		if e.opts.Audit != nil && why == "expired" {
			actx := audit.WithActor(ctx, audit.Actor{ID: "scheduler", Issuer: audit.IssuerScheduler})
			if err := e.opts.Audit.Record(actx, audit.Event{Action: "export.expire", DeploymentID: x.DeploymentID, BuildID: b.ID, Result: audit.ResultOK, Reason: "export " + x.ID + " expired: its build revokes the read-only keys"}); err != nil {
				e.log.Error("recording an export's expiry", "error", err)
			}
		}
	}
	return errors.Join(errs...)
}

// beforeResume brings an exported deployment back: its keys revoked and its domain
// locked again, unless the move went through (the import confirmed), when it refuses.
func (e *Engine) beforeResume(ctx context.Context, d store.Deployment) error {
	if d.State != StateExported {
		return nil
	}
	x, err := e.opts.Store.LatestExport(ctx, d.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if x.State == store.ExportConfirmed || x.State == store.ExportConfirming {
		return refuse(CodeConflict, "", "deployment %s moved to another fedhost: the target confirmed the import on %s, so it runs there now and cannot be resumed here", d.ID, x.UpdatedAt.Format("2006-01-02"))
	}
	if x.State == store.ExportExported {
		b, done, err := e.revoke(ctx, x.ID, store.ExportExported, store.ExportRevoked, "resumed", confirmWait)
		if err != nil {
			return err
		}
		if !done || b.State != store.BuildSucceeded {
			return refuse(CodeConflict, "", "the read-only keys of the export are not revoked yet (build %s is %s): resume again when it has finished", b.ID, b.State)
		}
	}
	rec, err := e.opts.Store.DeploymentDomain(ctx, d.ID)
	if err == nil && rec.State == domainTransferredOut {
		return refuse(CodeConflict, "", "deployment %s moved to another fedhost: its domain %s was transferred away from this host's registrar, so it cannot be resumed here", d.ID, rec.Name)
	}
	if err == nil && rec.Mode == store.DomainRegistered && rec.State == DomainReleased {
		if err := e.lockDomain(ctx, rec.Name); err != nil {
			return fmt.Errorf("locking domain %s again: %w", rec.Name, err)
		}
	}
	return nil
}

// lockDomain sets the transfer lock of a registered domain again after a release.
func (e *Engine) lockDomain(ctx context.Context, name string) error {
	rec, c, err := e.registeredDomain(ctx, name)
	if err != nil {
		return err
	}
	d, err := c.SetLock(ctx, name, true)
	if err != nil {
		return registrarError(rec.Registrar, err)
	}
	return e.opts.Store.UpdateDomain(ctx, name, map[string]any{"state": bounded(d.Status, 32), "locked": d.Locked})
}

// FetchRecipient asks a target fedhost for its age recipient.
func FetchRecipient(ctx context.Context, target string) (string, error) {
	bad := refuse(CodeInvalidConfiguration, "/target", "the target is the other fedhost's URL, http or https, such as https://fedhost.example/")
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(target) > 2048 {
		return "", bad
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/migration/recipient"
	u.RawQuery, u.Fragment = "", ""
	ctx, cancel := context.WithTimeout(ctx, recipientTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", bad
	}
	unreachable := func(why string) error {
		return refuse(CodeUnavailable, "/target", "the target did not give its recipient (%s): check the URL, or send its recipient instead", why)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return "", unreachable(fmt.Sprintf("no answer within %s", recipientTimeout))
		}
		return "", unreachable("it could not be reached")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", unreachable(fmt.Sprintf("it answered %d", resp.StatusCode))
	}
	var answer struct {
		Recipient string `json:"recipient"`
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRecipientAnswer+1))
	if err != nil || len(raw) > maxRecipientAnswer || json.Unmarshal(raw, &answer) != nil || answer.Recipient == "" {
		return "", unreachable(`its answer is not {"recipient": ...}`)
	}
	return answer.Recipient, nil
}

func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on a supported system
	}
	return b
}

func randomText(n int) string { return base64.RawURLEncoding.EncodeToString(randomBytes(n)) }
