package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/ui"
)

// TestPreview serves the pages on the address in FEDHOST_UI_PREVIEW, with the app plugins
// of the directory in FEDHOST_UI_PLUGINS (bin/plugins after make), and sample data, until
// the test times out: for looking at them in a browser. /_preview/as/NAME?next=PATH signs
// in as root or alice. It has no queue, so Deploy answers an error.
func TestPreview(t *testing.T) {
	addr, dir := os.Getenv("FEDHOST_UI_PREVIEW"), os.Getenv("FEDHOST_UI_PLUGINS")
	if addr == "" || dir == "" {
		t.Skip("set FEDHOST_UI_PREVIEW=127.0.0.1:8899 and FEDHOST_UI_PLUGINS=../bin/plugins to serve the pages for a browser")
	}
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: data})
	require.NoError(t, err)
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: data,
		// The providers' settings are not needed for the pages: leave them unconfigured.
		Settings: func(d sdk.Description) (json.RawMessage, bool) { return nil, d.Kind == sdk.KindApp }})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	defer m.Stop()
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	engine := deploy.New(deploy.Options{Store: st, Plugins: m, Catalog: cat})
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail, Params: fastHash})

	users := map[string]auth.User{}
	for _, name := range []string{"root", "alice"} {
		u, _, err := accounts.CreateUser(ctx, name, name == "root")
		require.NoError(t, err)
		users[name] = u
	}
	news, err := engine.Create(ctx, users["alice"].ID, "News reader", "alice-news")
	require.NoError(t, err)
	_, err = engine.Create(ctx, users["alice"].ID, "Photos", "alice-photos")
	require.NoError(t, err)
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: news.ID, Name: "miniflux-web", App: "miniflux", Type: "instance",
		State: store.ResourceProvisioned, Result: `{"state":"running","addresses":{"http":"127.0.0.1:18080"}}`}))
	require.NoError(t, st.UpdateDeployment(ctx, news.ID, map[string]any{"state": deploy.StateActive, "domain": "news.example.org"}))
	done, err := st.SubmitBuild(ctx, news.ID, store.OperationDeploy, store.Submission{Config: "{}", SecretRefs: "{}", Domain: "news.example.org"})
	require.NoError(t, err)
	for i, msg := range []string{"asking the enabled apps what they need", "1 apps, 2 resources and their nodes checked with their providers",
		"created postgresql alice-news-miniflux-db at postgresql", "node miniflux-web is healthy at http=127.0.0.1:18080"} {
		_, err := st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: done.ID, Step: []string{"plan", "plan", "provision", "verdict"}[i],
			Level: store.LevelInfo, Message: msg, Progress: []int{2, 5, 50, 90}[i]})
		require.NoError(t, err)
	}
	require.NoError(t, st.SetBuildState(ctx, done.ID, store.BuildRunning, ""))
	require.NoError(t, st.SetBuildState(ctx, done.ID, store.BuildSucceeded, ""))
	_, err = st.SubmitBuild(ctx, news.ID, store.OperationSuspend, store.Submission{Config: "{}", SecretRefs: "{}"})
	require.NoError(t, err)

	photos, err := st.ListDeployments(ctx, users["alice"].ID)
	require.NoError(t, err)
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail, Version: "preview"})
	// A build that runs for 3 seconds, to watch build.js follow it.
	app.Get("/_preview/simulate", func(c *fiber.Ctx) error {
		b, err := st.SubmitBuild(ctx, photos[0].ID, store.OperationDeploy, store.Submission{Config: "{}", SecretRefs: "{}"})
		if err != nil {
			return err
		}
		go func() {
			_ = st.SetBuildState(ctx, b.ID, store.BuildRunning, "")
			for i := 1; i <= 6; i++ {
				time.Sleep(500 * time.Millisecond)
				_, _ = st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: b.ID, Step: "provision", Level: store.LevelInfo,
					Message: fmt.Sprintf("step %d of 6 done", i), Progress: i * 100 / 6})
			}
			_ = st.SetBuildState(ctx, b.ID, store.BuildSucceeded, "")
		}()
		return c.Redirect("/builds/" + b.ID)
	})
	app.Get("/_preview/as/:name", func(c *fiber.Ctx) error {
		ns, err := accounts.NewSession(c.UserContext(), users[c.Params("name")].ID)
		if err != nil {
			return err
		}
		c.Cookie(&fiber.Cookie{Name: ui.CookieName, Value: ns.ID, Path: "/", HTTPOnly: true})
		return c.Redirect(c.Query("next", "/"))
	})
	ui.New(ui.Deps{Engine: engine, Store: st, Auth: accounts, Audit: trail, Plugins: m, Version: "preview"}).Mount(app)
	t.Logf("serving on http://%s/ (deployment %s, build %s)", addr, news.ID, done.ID)
	go func() { _ = app.Listen(addr) }()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Minute)
	}
	time.Sleep(time.Until(deadline) - 5*time.Second)
	require.NoError(t, app.Shutdown())
}
