package ui_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/ui"
)

// TestScreenshots saves PNGs of the backup and destroy pages, as headless Chromium draws them, into
// the directory in FEDHOST_UI_SHOTS: for looking at them, not for checking them.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("FEDHOST_UI_SHOTS")
	if dir == "" {
		t.Skip("set FEDHOST_UI_SHOTS=/tmp/ui-shots to save screenshots of the backup pages (needs chromium)")
	}
	exe, err := exec.LookPath("chromium")
	require.NoError(t, err, "install the Debian package chromium")
	require.NoError(t, os.MkdirAll(dir, 0o755))

	b := setup(t)
	ctx := context.Background()
	d := b.create(t, "alice", "alice-news")
	activate(t, b, d)
	require.NoError(t, b.st.UpdateDeployment(ctx, d.ID, map[string]any{"domain": "news.example.org"}))
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-web", App: "miniflux", Type: "instance",
		State: store.ResourceProvisioned, Result: `{"state":"running","addresses":{"http":"127.0.0.1:18080"}}`}))
	withData(t, b, d, "miniflux")
	withData(t, b, d, "pixelfed")
	now := time.Now()
	require.NoError(t, b.st.EnsureAppBackup(ctx, d.ID, "miniflux", now.Add(-80*time.Hour)))
	good := finishedBuild(t, b, d, store.BuildSucceeded)
	require.NoError(t, b.st.BackupStarted(ctx, d.ID, "miniflux", good.ID, store.BackupScheduled, now.Add(-52*time.Hour)))
	require.NoError(t, b.st.BackupFinished(ctx, d.ID, "miniflux", snapshots[0].ID, "", now.Add(-52*time.Hour)))
	for _, h := range []time.Duration{28, 4, 1} {
		failed := finishedBuild(t, b, d, store.BuildFailed)
		require.NoError(t, b.st.BackupStarted(ctx, d.ID, "miniflux", failed.ID, store.BackupScheduled, now.Add(-h*time.Hour)))
		require.NoError(t, b.st.BackupFinished(ctx, d.ID, "miniflux", "",
			`backup of miniflux: pg_dump: error: connection to server at "10.20.0.7", port 5432 failed: FATAL: password authentication failed for user "alice_news_miniflux"`,
			now.Add(-h*time.Hour)))
	}
	require.NoError(t, b.st.DrillStarted(ctx, d.ID, "miniflux", now.Add(-50*time.Hour)))
	require.NoError(t, b.st.DrillFinished(ctx, d.ID, "miniflux", store.Drill{Snapshot: snapshots[0].ID, Tables: 23, Rows: 4812, Seconds: 3.4}, now.Add(-50*time.Hour)))
	require.NoError(t, b.st.DrillStarted(ctx, d.ID, "miniflux", now.Add(-2*time.Hour)))
	require.NoError(t, b.st.DrillFinished(ctx, d.ID, "miniflux", store.Drill{Error: "restore drill of miniflux: restoring snapshot aaaa1111: restic: pack 4f3a9c2e not found"}, now.Add(-2*time.Hour)))
	require.NoError(t, b.st.EnsureAppBackup(ctx, d.ID, "pixelfed", now.Add(-80*time.Hour)))
	require.NoError(t, b.st.BackupStarted(ctx, d.ID, "pixelfed", good.ID, store.BackupManual, now.Add(-3*time.Hour)))
	require.NoError(t, b.st.BackupFinished(ctx, d.ID, "pixelfed", "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", "", now.Add(-3*time.Hour)))
	require.NoError(t, b.st.DrillStarted(ctx, d.ID, "pixelfed", now.Add(-time.Hour)))
	require.NoError(t, b.st.DrillFinished(ctx, d.ID, "pixelfed", store.Drill{Snapshot: "0f1e2d3c", Tables: 41, Rows: 120, Seconds: 2}, now.Add(-time.Hour)))
	ui.SetSnapshots(b.ui, func(_ context.Context, _, app string) ([]backup.Snapshot, error) {
		if app == "pixelfed" {
			return nil, nil
		}
		return snapshots, nil
	})

	tab, shot := shooter(t, b, exe, dir)
	shot("deployment", "/deployments/"+d.ID, 1280)
	shot("deployment-narrow", "/deployments/"+d.ID, 420)
	// Nothing but a table's own scrolling is wider than a narrow screen.
	width, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	require.NoError(t, err)
	require.LessOrEqual(t, width, 420, "the page scrolls sideways on a narrow screen")
	shot("backups", "/deployments/"+d.ID+"/backups/miniflux", 1280)
	shot("backups-empty", "/deployments/"+d.ID+"/backups/pixelfed", 1280)
	shot("restore", "/deployments/"+d.ID+"/backups/miniflux/restore/"+snapshots[1].ID, 1280)

	// The server's answer to a restore sent without the confirmation.
	require.NoError(t, chromedp.Do(tab,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('form[method=post].narrow').noValidate = true`),
		chromedp.Click(chromedp.CSS(`button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`#restore-confirm-error`))))
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "restore-unconfirmed.png"), png, 0o644))
	shot("destroy", "/deployments/"+d.ID+"/destroy", 1280)
	shot("export", "/deployments/"+d.ID+"/export", 1280)
	// The server's answer to a recipient that is none.
	require.NoError(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.CSS(`#export-recipient`), "age1notarecipient"),
		chromedp.Click(chromedp.CSS(`button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`.alert`))))
	png, err = chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "export-refused.png"), png, 0o644))
	fmt.Fprintln(os.Stderr, "screenshots in", dir)
}

// TestFrontDoorScreenshots saves PNGs of a deployment page with its front door: one whose
// dns provider serves the zone and whose certificate's renewal failed, and one on a host
// without a dns provider, into FEDHOST_UI_SHOTS.
func TestFrontDoorScreenshots(t *testing.T) {
	dir := os.Getenv("FEDHOST_UI_SHOTS")
	if dir == "" {
		t.Skip("set FEDHOST_UI_SHOTS=/tmp/ui-shots to save screenshots of the front door (needs chromium)")
	}
	exe, err := exec.LookPath("chromium")
	require.NoError(t, err, "install the Debian package chromium")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ctx := context.Background()

	b := setupFrontDoor(t, true)
	d := frontDoorSite(t, b, "acme.example.org", time.Now().Add(20*24*time.Hour).UTC(), servedZone)
	renewal, err := b.st.SubmitBuild(ctx, d.ID, store.OperationDeploy, store.Submission{Config: d.Config, SecretRefs: "{}", Domain: d.Domain})
	require.NoError(t, err)
	require.NoError(t, b.st.SetBuildState(ctx, renewal.ID, store.BuildRunning, ""))
	require.NoError(t, b.st.SetBuildState(ctx, renewal.ID, store.BuildFailed, "miniflux-tls (tls by acme): urn:ietf:params:acme:error:rateLimited"))
	_, shot := shooter(t, b, exe, dir)
	shot("frontdoor", "/deployments/"+d.ID, 1280)
	shot("frontdoor-narrow", "/deployments/"+d.ID, 420)

	manual := setupFrontDoor(t, false)
	d = frontDoorSite(t, manual, "acme.example.org", time.Now().Add(60*24*time.Hour).UTC(), nil)
	_, shot = shooter(t, manual, exe, dir)
	shot("frontdoor-manual-dns", "/deployments/"+d.ID, 1280)
	fmt.Fprintln(os.Stderr, "screenshots in", dir)
}

// shooter serves b's pages on loopback to a headless Chromium signed in as alice, and
// returns its tab and a func that saves the page at path, width pixels wide, as name.png.
func shooter(t *testing.T, b *bundle, exe, dir string) (context.Context, func(name, path string, width int64)) {
	t.Helper()
	b.app.Get("/_shots/as/:name", func(c *fiber.Ctx) error {
		ns, err := b.auth.NewSession(c.UserContext(), b.users[c.Params("name")].ID)
		if err != nil {
			return err
		}
		c.Cookie(&fiber.Cookie{Name: ui.CookieName, Value: ns.ID, Path: "/", HTTPOnly: true})
		return c.Redirect(c.Query("next", "/"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	base := "http://" + ln.Addr().String()

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	tab, cancelTab := chromedp.NewContext(alloc)
	tab, cancelTime := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })

	shot := func(name, path string, width int64) {
		t.Helper()
		require.NoError(t, chromedp.Do(tab, chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+path)))
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		file := filepath.Join(dir, name+".png")
		require.NoError(t, os.WriteFile(file, png, 0o644))
		t.Logf("saved %s", file)
	}
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(base+"/_shots/as/alice?next=/deployments")))
	return tab, shot
}
