package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/ui"
)

// minifluxCatalog builds the Miniflux plugin and starts it, and answers its manager and catalog.
func minifluxCatalog(t *testing.T) (*plugins.Manager, *catalog.Catalog) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fedhost-app-miniflux")
	out, err := exec.Command("go", "build", "-o", bin, "../plugins/apps/miniflux").CombinedOutput()
	require.NoError(t, err, "%s", out)
	sum, err := pluginclient.FileSHA256(bin)
	require.NoError(t, err)
	require.NoError(t, plugins.Lock{"fedhost-app-miniflux": sum}.Write(dir))
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	return m, cat
}

// setupWithMiniflux is setup with a catalog of the real Miniflux plugin, and alice's
// deployment that enables it.
func setupWithMiniflux(t *testing.T) (*bundle, store.Deployment) {
	t.Helper()
	ctx := context.Background()
	m, cat := minifluxCatalog(t)
	b := setupWith(t, func(o *deploy.Options, d *ui.Deps) { o.Plugins, o.Catalog = m, cat })
	d := b.create(t, "alice", "alice-news")
	require.NoError(t, b.st.UpdateDeployment(ctx, d.ID, map[string]any{"state": deploy.StateActive, "domain": "news.example.org",
		"config": `{"domain":"news.example.org","apps":{"miniflux":{"enable":true}}}`}))
	d, err := b.st.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	return b, d
}

// finishedRun stores a run of d that ended as end, with output.
func finishedRun(t *testing.T, b *bundle, d store.Deployment, run store.Run, end store.RunEnd, output ...store.RunOutput) store.Run {
	t.Helper()
	ctx := context.Background()
	run.DeploymentID, run.App, run.Trigger = d.ID, "miniflux", store.RunManual
	r, err := b.st.CreateRun(ctx, run)
	require.NoError(t, err)
	require.NoError(t, b.st.StartRun(ctx, r.ID, "web", 1))
	for i, o := range output {
		o.RunID, o.Seq = r.ID, i+1
		require.NoError(t, b.st.AppendRunOutput(ctx, o))
		end.OutputBytes += int64(len(o.Data))
	}
	require.NoError(t, b.st.FinishRun(ctx, r.ID, end))
	r, err = b.st.GetRun(ctx, r.ID)
	require.NoError(t, err)
	return r
}

// The operation page renders the form from the input schema with the configure form's
// renderer, never shows a password back, and a refused input is marked at its field
// with nothing queued.
func TestOperationPageFormAndRefusal(t *testing.T) {
	t.Parallel()
	b, d := setupWithMiniflux(t)
	alice := b.as(t, "alice")
	resp, page := alice.get(t, "/deployments/"+d.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `href="/deployments/`+d.ID+`/operations/miniflux/create-user"`)
	require.NotContains(t, page, "/operations/miniflux/backup\"", "backup has its own section")

	path := "/deployments/" + d.ID + "/operations/miniflux/create-user"
	resp, page = alice.get(t, path)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `type="password"`)
	requireLabelled(t, page)

	resp, page = alice.post(t, path, url.Values{"/username": {"bob"}, "/password": {"short"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, page)
	require.Contains(t, page, "The input was not accepted")
	require.Contains(t, page, `aria-invalid="true"`)
	require.NotContains(t, page, `value="short"`, "a refused password is not sent back")
	runs, err := b.st.ListRuns(context.Background(), d.ID, 10)
	require.NoError(t, err)
	require.Empty(t, runs)
}

// TestRunScreenshots saves PNGs of the deployment page's operations, an operation's form
// with its history, and runs, into FEDHOST_UI_SHOTS: for looking at them.
func TestRunScreenshots(t *testing.T) {
	dir := os.Getenv("FEDHOST_UI_SHOTS")
	if dir == "" {
		t.Skip("set FEDHOST_UI_SHOTS=/tmp/ui-shots to save screenshots of the operation pages (needs chromium)")
	}
	exe, err := exec.LookPath("chromium")
	require.NoError(t, err, "install the Debian package chromium")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	b, d := setupWithMiniflux(t)
	zero, one := 0, 1
	opml := finishedRun(t, b, d, store.Run{Operation: "export-opml", Actor: "alice", Input: `{"username":"alice"}`, OutputFile: "feeds.opml", Exclusive: false},
		store.RunEnd{State: store.RunSucceeded, Reason: "exited with status 0", ExitCode: &zero},
		store.RunOutput{Stream: "fedhost", Data: "run started by alice: miniflux export-opml in node web"},
		store.RunOutput{Stream: "stdout", Data: `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<opml version="2.0">` + "\n" + `  <head><title>Miniflux</title></head>` + "\n" + `  <body>` + "\n" +
			`    <outline text="All"><outline title="Feed /news.xml" text="Feed /news.xml" xmlUrl="http://127.0.0.1:39111/news.xml" type="rss"></outline></outline>` + "\n  </body>\n</opml>\n"},
		store.RunOutput{Stream: "fedhost", Data: "run succeeded: exited with status 0"})
	finishedRun(t, b, d, store.Run{Operation: "create-user", Actor: "alice", Input: `{"admin":true,"password":"(secret, not kept)","username":"bob"}`, Exclusive: true},
		store.RunEnd{State: store.RunFailed, Reason: "exited with status 1", ExitCode: &one},
		store.RunOutput{Stream: "stdout", Data: "Enter Username: Enter Password: \n"},
		store.RunOutput{Stream: "stderr", Data: "The user already exists\n"})
	finishedRun(t, b, d, store.Run{Operation: "refresh-feeds", Actor: "root", Input: `{}`, Exclusive: true},
		store.RunEnd{State: store.RunTimedOut, Reason: "timed out after 15m0s and killed (killed by signal terminated)"})
	finishedRun(t, b, d, store.Run{Operation: "flush-sessions", Actor: "alice", Input: `{}`, Sensitive: true, Exclusive: true},
		store.RunEnd{State: store.RunSucceeded, Reason: "exited with status 0", ExitCode: &zero})

	_, err = b.engine.AddSchedule(context.Background(), d.ID, deploy.ScheduleRequest{App: "miniflux", Operation: "export-opml", Cron: "30 3 * * *", Input: []byte(`{"username":"alice"}`), Actor: "alice"})
	require.NoError(t, err)
	_, shot := shooter(t, b, exe, dir)
	shot("runs-deployment", "/deployments/"+d.ID+"#app-operations", 1280)
	shot("runs-operation", "/deployments/"+d.ID+"/operations/miniflux/create-user", 1280)
	shot("runs-operation-narrow", "/deployments/"+d.ID+"/operations/miniflux/create-user", 420)
	shot("runs-run", "/deployments/"+d.ID+"/runs/"+opml.ID, 1280)
	shot("runs-schedules", "/deployments/"+d.ID+"/operations/miniflux/export-opml", 1280)
	fmt.Fprintln(os.Stderr, "screenshots in", dir)
}
