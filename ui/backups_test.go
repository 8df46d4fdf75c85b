package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/ui"
)

// withQueue gives the engine a queue that is never started: a build it queues stays
// queued, which is all the pages need to show.
func withQueue(t *testing.T, b *bundle) {
	t.Helper()
	q, err := queue.New(b.st, queue.Config{
		Builder: queue.BuilderFunc(func(context.Context, string, func(step, message string)) error { return nil }),
		Logger:  slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	b.engine.SetQueue(q)
}

// withData gives app of d what makes it an app with data to back up: a database and a
// backups bucket, both provisioned.
func withData(t *testing.T, b *bundle, d store.Deployment, app string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: app + "-db", App: app,
		Type: contract.PostgreSQL, State: store.ResourceProvisioned, Spec: "{}", Result: "{}"}))
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: app + "-backups", App: app,
		Type: contract.S3, State: store.ResourceProvisioned, Spec: `{"buckets":{"backups":{"backup":true}}}`, Result: "{}"}))
}

func activate(t *testing.T, b *bundle, d store.Deployment) {
	t.Helper()
	require.NoError(t, b.st.UpdateDeployment(context.Background(), d.ID, map[string]any{"state": deploy.StateActive}))
}

// finishedBuild stores a build of d that ended in state, as a backup build would.
func finishedBuild(t *testing.T, b *bundle, d store.Deployment, state store.BuildState) store.Build {
	t.Helper()
	ctx := context.Background()
	build, err := b.st.SubmitBuild(ctx, d.ID, store.OperationBackup, store.Submission{Config: `{"app":"miniflux"}`, SecretRefs: "{}"})
	require.NoError(t, err)
	require.NoError(t, b.st.SetBuildState(ctx, build.ID, store.BuildRunning, ""))
	require.NoError(t, b.st.SetBuildState(ctx, build.ID, state, ""))
	return build
}

// row is the HTML of the table row with id, up to the end of the row that follows
// it when that row holds the row's alerts.
func row(t *testing.T, page, id string) string {
	t.Helper()
	start := strings.Index(page, `<tr id="`+id+`"`)
	require.GreaterOrEqual(t, start, 0, "no row %s in the page", id)
	rest := page[start:]
	end := strings.Index(rest, "</tr>") + len("</tr>")
	if next := strings.TrimSpace(rest[end:]); strings.HasPrefix(next, `<tr class="backup-alerts">`) {
		end += strings.Index(rest[end:], "</tr>") + len("</tr>")
	}
	return rest[:end]
}

func TestDeploymentPageShowsWhereBackupsStand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.create(t, "alice", "alice-news")
	activate(t, b, d)
	withData(t, b, d, "miniflux")
	withData(t, b, d, "pixelfed")
	now := time.Now()

	// miniflux: good 50 hours ago, then two failures: stale and failed.
	const good = "4f3a9c2e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f"
	require.NoError(t, b.st.EnsureAppBackup(ctx, d.ID, "miniflux", now.Add(-72*time.Hour)))
	first := finishedBuild(t, b, d, store.BuildSucceeded)
	require.NoError(t, b.st.BackupStarted(ctx, d.ID, "miniflux", first.ID, store.BackupScheduled, now.Add(-50*time.Hour)))
	require.NoError(t, b.st.BackupFinished(ctx, d.ID, "miniflux", good, "", now.Add(-50*time.Hour)))
	var failed store.Build
	for _, h := range []time.Duration{26, 2} {
		failed = finishedBuild(t, b, d, store.BuildFailed)
		require.NoError(t, b.st.BackupStarted(ctx, d.ID, "miniflux", failed.ID, store.BackupScheduled, now.Add(-h*time.Hour)))
		require.NoError(t, b.st.BackupFinished(ctx, d.ID, "miniflux", "", "backup of miniflux: pg_dump: connection refused", now.Add(-h*time.Hour)))
	}
	// pixelfed: good 3 hours ago.
	require.NoError(t, b.st.EnsureAppBackup(ctx, d.ID, "pixelfed", now.Add(-72*time.Hour)))
	require.NoError(t, b.st.BackupStarted(ctx, d.ID, "pixelfed", first.ID, store.BackupManual, now.Add(-3*time.Hour)))
	require.NoError(t, b.st.BackupFinished(ctx, d.ID, "pixelfed", "99aa88bb77cc66dd", "", now.Add(-3*time.Hour)))
	// miniflux's drill: good 30 hours ago, then one that failed 1 hour ago; pixelfed's
	// good 2 hours ago.
	require.NoError(t, b.st.DrillStarted(ctx, d.ID, "miniflux", now.Add(-30*time.Hour)))
	require.NoError(t, b.st.DrillFinished(ctx, d.ID, "miniflux", store.Drill{Snapshot: good, Tables: 23, Rows: 4812, Seconds: 3.4}, now.Add(-30*time.Hour)))
	require.NoError(t, b.st.DrillStarted(ctx, d.ID, "miniflux", now.Add(-time.Hour)))
	require.NoError(t, b.st.DrillFinished(ctx, d.ID, "miniflux", store.Drill{Error: "restore drill of miniflux: restic: pack 4f3a not found", Seconds: 1.2}, now.Add(-time.Hour)))
	require.NoError(t, b.st.DrillStarted(ctx, d.ID, "pixelfed", now.Add(-2*time.Hour)))
	require.NoError(t, b.st.DrillFinished(ctx, d.ID, "pixelfed", store.Drill{Snapshot: "99aa88bb77cc66dd", Tables: 41, Rows: 120, Seconds: 2}, now.Add(-2*time.Hour)))

	var listed atomic.Int32
	ui.SetSnapshots(b.ui, func(context.Context, string, string) ([]backup.Snapshot, error) {
		listed.Add(1)
		return nil, nil
	})
	res, body := b.as(t, "alice").get(t, "/deployments/"+d.ID)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `<h2 id="backups">Backups</h2>`)
	require.Zero(t, listed.Load(), "the deployment page does not ask the backup repository")

	mf := row(t, body, "backup-miniflux")
	require.Contains(t, mf, `<span class="state state-stale">stale</span>`)
	require.Contains(t, mf, `<span class="state state-failed">failed</span>`)
	require.Contains(t, mf, `<code>@daily</code>`)
	require.Contains(t, mf, `<td>30 days</td>`)
	require.Contains(t, mf, `<code title="`+good+`">4f3a9c2e</code>`, "the last good snapshot, short")
	require.Contains(t, mf, "2 days ago", "the last good backup's age")
	require.Regexp(t, `id="backup-miniflux-stale"><strong>Stale:</strong> no good backup for over 36 hours`, mf)
	require.Contains(t, mf, `<strong>Last backup failed:</strong> backup of miniflux: pg_dump: connection refused`)
	require.Contains(t, mf, "2 failed backups since the last good one")
	require.Contains(t, mf, `<a href="/builds/`+failed.ID+`">See the failed build`)
	require.Contains(t, mf, `action="/deployments/`+d.ID+`/backups/miniflux"`)
	require.Regexp(t, `name="csrf" value="[^"]+"`, mf)
	require.Contains(t, mf, `href="/deployments/`+d.ID+`/backups/miniflux">Backups and restore`)
	require.Regexp(t, `<time datetime="[^"]+">[^<]+</time><br><span class="muted">in (\d+ (hours?|minutes?)|a moment)|due now`, mf, "the next scheduled backup")

	require.Contains(t, mf, `<span class="state state-failed">drill failed</span>`)
	require.Contains(t, mf, `<strong>Last restore drill failed:</strong> restore drill of miniflux: restic: pack 4f3a not found`)
	require.Contains(t, mf, "the last good drill was 30 hours ago")
	require.Contains(t, mf, "23 tables, 4812 rows, 3.4 s", "the last good drill's counts and time")
	require.Contains(t, mf, `action="/deployments/`+d.ID+`/backups/miniflux/drill"`)

	pf := row(t, body, "backup-pixelfed")
	require.NotContains(t, pf, "stale")
	require.NotContains(t, pf, "failed")
	require.Contains(t, pf, "3 hours ago")
	require.Contains(t, pf, `>99aa88bb</code>`)
	require.Contains(t, pf, "41 tables, 120 rows, 2.0 s")

	t.Run("a suspended deployment is not stale and takes no scheduled backups", func(t *testing.T) {
		require.NoError(t, b.st.UpdateDeployment(ctx, d.ID, map[string]any{"state": deploy.StateSuspended}))
		_, body := b.as(t, "alice").get(t, "/deployments/"+d.ID)
		mf := row(t, body, "backup-miniflux")
		require.NotContains(t, mf, "state-stale")
		require.Contains(t, mf, "Last backup failed:")
		require.Contains(t, mf, "none while the deployment is suspended")
	})
}

func TestDeploymentWithoutDataHasNoBackups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, "alice", "alice-news")
	// A database without a backups bucket is not backed up.
	require.NoError(t, b.st.PutResource(context.Background(), store.Resource{DeploymentID: d.ID, Name: "miniflux-db", App: "miniflux",
		Type: contract.PostgreSQL, State: store.ResourceProvisioned}))
	_, body := b.as(t, "alice").get(t, "/deployments/"+d.ID)
	require.Contains(t, body, "No app of this deployment keeps data to back up yet")
	require.NotContains(t, body, `id="backup-miniflux"`)
}

// builds returns the builds of d, newest first.
func builds(t *testing.T, b *bundle, d store.Deployment) []store.Build {
	t.Helper()
	list, err := b.st.ListBuilds(context.Background(), d.ID, 0)
	require.NoError(t, err)
	return list
}

func TestBackUpNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withQueue(t, b)
	d := b.create(t, "alice", "alice-news")
	activate(t, b, d)
	withData(t, b, d, "miniflux")
	alice, bob := b.as(t, "alice"), b.as(t, "bob")
	path := "/deployments/" + d.ID + "/backups/miniflux"

	for _, token := range []string{"", "forged"} {
		res, _ := alice.postRaw(t, path, url.Values{"csrf": {token}})
		require.Equal(t, http.StatusForbidden, res.StatusCode, "csrf %q", token)
	}
	res, body := bob.post(t, path, url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "another operator, with his own session's token")
	require.NotContains(t, body, "alice-news")
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.operation", Result: string(audit.ResultDenied), Actor: b.users["bob"].ID, DeploymentID: d.ID}))
	res, _ = alice.post(t, "/deployments/"+d.ID+"/backups/pixelfed", url.Values{})
	require.Equal(t, http.StatusNotFound, res.StatusCode, "an app without data")
	require.Empty(t, builds(t, b, d), "a refused backup queues nothing")

	res, _ = alice.post(t, path, url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	list := builds(t, b, d)
	require.Len(t, list, 1)
	require.Equal(t, "/builds/"+list[0].ID, res.Header.Get("Location"))
	require.Equal(t, store.OperationBackup, list[0].Operation)
	require.Equal(t, store.BuildQueued, list[0].State)
	var op deploy.Operation
	require.NoError(t, json.Unmarshal([]byte(list[0].Config), &op))
	require.Equal(t, deploy.Operation{App: "miniflux", Trigger: store.BackupManual}, op)
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.operation", Result: string(audit.ResultOK), Actor: b.users["alice"].ID, DeploymentID: d.ID}))

	// While it is queued, the buttons are disabled and a second one is refused.
	_, body = alice.get(t, "/deployments/"+d.ID)
	require.Regexp(t, `<button type="submit" class="secondary small" disabled aria-describedby="backups-busy">Back up`, body)
	res, body = alice.post(t, path, url.Values{})
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, body, `<div class="alert" role="alert">The backup of miniflux was not queued: build `+list[0].ID+` of this deployment is queued`)
	require.Len(t, builds(t, b, d), 1)

	res, _ = b.as(t, "root").post(t, path, url.Values{})
	require.Equal(t, http.StatusConflict, res.StatusCode, "a superuser may, but not while a build is queued")
}

// snapshots are three backups of miniflux, oldest first as the engine lists them.
var snapshots = []backup.Snapshot{
	{ID: "aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111", Time: time.Now().Add(-49 * time.Hour), Tags: map[string]string{"trigger": "scheduled"}, Database: "alice_news_miniflux"},
	{ID: "bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222", Time: time.Now().Add(-25 * time.Hour), Tags: map[string]string{"trigger": "upgrade"}, Database: "alice_news_miniflux"},
	{ID: "cccc3333cccc3333cccc3333cccc3333cccc3333cccc3333cccc3333cccc3333", Time: time.Now().Add(-1 * time.Hour), Tags: map[string]string{"trigger": "manual"}, Database: "alice_news_miniflux"},
}

func TestBackupsPageListsNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, "alice", "alice-news")
	activate(t, b, d)
	withData(t, b, d, "miniflux")
	var list []backup.Snapshot
	var listErr error
	ui.SetSnapshots(b.ui, func(_ context.Context, id, app string) ([]backup.Snapshot, error) {
		require.Equal(t, d.ID, id)
		require.Equal(t, "miniflux", app)
		return list, listErr
	})
	alice := b.as(t, "alice")
	path := "/deployments/" + d.ID + "/backups/miniflux"

	res, body := alice.get(t, path)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "miniflux has no backups yet. Choose <strong>Back up now</strong>")
	require.Contains(t, body, `<form method="post" action="`+path+`"`)

	list = snapshots
	_, body = alice.get(t, path)
	var order []string
	for _, m := range regexp.MustCompile(`href="`+regexp.QuoteMeta(path)+`/restore/([0-9a-f]+)"`).FindAllStringSubmatch(body, -1) {
		order = append(order, m[1])
	}
	require.Equal(t, []string{snapshots[2].ID, snapshots[1].ID, snapshots[0].ID}, order, "newest first, each with its restore")
	require.Contains(t, body, "<td>upgrade</td>")
	require.Contains(t, body, `<code title="`+snapshots[2].ID+`">cccc3333</code>`)
	require.Contains(t, body, "(1 hour ago)")

	list, listErr = nil, errors.New("restic snapshots: s3.example.org: no such host")
	res, body = alice.get(t, path)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Contains(t, body, "The backups could not be listed: restic snapshots: s3.example.org: no such host.")
	require.NotContains(t, body, "has no backups yet", "a failed listing is not an empty one")
	require.Contains(t, body, `<form method="post" action="`+path+`"`, "a backup can be taken all the same")

	// As the engine says it: the repository did not answer.
	list, listErr = nil, &deploy.Error{Code: deploy.CodeUnavailable, Message: "the backups of miniflux could not be listed: restic: timeout; try again later"}
	res, body = alice.get(t, path)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Contains(t, body, "The backups of miniflux could not be listed: restic: timeout; try again later. If it keeps failing, tell your hosting provider.")

	res, body = b.as(t, "bob").get(t, path)
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.NotContains(t, body, "alice-news")
	res, _ = alice.get(t, "/deployments/"+d.ID+"/backups/pixelfed")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

func TestRestoreNeedsConfirmation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withQueue(t, b)
	d := b.create(t, "alice", "alice-news")
	activate(t, b, d)
	withData(t, b, d, "miniflux")
	ui.SetSnapshots(b.ui, func(context.Context, string, string) ([]backup.Snapshot, error) { return snapshots, nil })
	alice := b.as(t, "alice")
	chosen := snapshots[1]
	path := "/deployments/" + d.ID + "/backups/miniflux/restore/" + chosen.ID

	res, body := alice.get(t, path)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `<code>`+chosen.ID+`</code>`)
	require.Contains(t, body, "<dd>upgrade</dd>")
	require.Contains(t, body, `<input type="checkbox" id="restore-confirm" name="confirm" value="yes" required>`)
	require.Contains(t, body, `<label for="restore-confirm">I understand the data since this backup is lost</label>`)
	require.Contains(t, body, `<form method="post" action="`+path+`"`)
	requireLabelled(t, body)

	res, _ = alice.get(t, "/deployments/"+d.ID+"/backups/miniflux/restore/"+strings.Repeat("d", 64))
	require.Equal(t, http.StatusNotFound, res.StatusCode, "a backup the app does not have")

	res, body = alice.post(t, path, url.Values{})
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "no confirmation")
	require.Contains(t, body, `aria-invalid="true" aria-describedby="restore-confirm-error"`)
	require.Contains(t, body, "Nothing was restored")
	res, _ = alice.post(t, path, url.Values{"confirm": {"no"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.operation", Result: string(audit.ResultInvalid), Actor: b.users["alice"].ID, DeploymentID: d.ID}))
	res, _ = alice.postRaw(t, path, url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "no CSRF token")
	res, _ = b.as(t, "bob").post(t, path, url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "another operator")
	res, _ = alice.post(t, "/deployments/"+d.ID+"/backups/miniflux/restore/not-an-id", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Empty(t, builds(t, b, d), "nothing is restored without the confirmation")

	res, _ = alice.post(t, path, url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	list := builds(t, b, d)
	require.Len(t, list, 1)
	require.Equal(t, "/builds/"+list[0].ID, res.Header.Get("Location"))
	require.Equal(t, store.OperationRestore, list[0].Operation)
	var op deploy.Operation
	require.NoError(t, json.Unmarshal([]byte(list[0].Config), &op))
	require.Equal(t, "miniflux", op.App)
	require.Equal(t, chosen.ID, op.Snapshot)

	// With the restore queued, the confirmation page says to wait.
	_, body = alice.get(t, path)
	require.Contains(t, body, `class="danger" disabled aria-describedby="restore-busy"`)
}
