package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pluginsCopy copies the built plugins into a directory of the test's own, with the
// artifacts beside it where the plugins look for them.
func pluginsCopy(t testing.TB) string {
	root := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(binDir, "artifacts"), filepath.Join(root, "artifacts")))
	dir := filepath.Join(root, "plugins")
	require.NoError(t, os.Mkdir(dir, 0o755))
	entries, err := os.ReadDir(filepath.Join(binDir, "plugins"))
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(binDir, "plugins", e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), data, 0o755))
	}
	return dir
}

func lock(t testing.TB, dir string) {
	cmd := exec.Command(filepath.Join(binDir, "fedhost"), "plugins", "lock")
	cmd.Env = append(os.Environ(), "FEDHOST_PLUGIN_DIR="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func (h *host) builds(id string) []build {
	var out []build
	require.Equal(h.t, http.StatusOK, h.call("GET", "/deployments/"+id+"/builds", nil, &out))
	return out
}

type revisioned struct {
	CatalogRevision string `json:"catalog_revision"`
	UpdateAvailable *struct {
		From, To string
	} `json:"update_available"`
}

func (h *host) revision(id string) revisioned {
	var r revisioned
	require.Equal(h.t, http.StatusOK, h.call("GET", "/deployments/"+id, nil, &r))
	return r
}

// Installing a newer Miniflux plugin makes an automatic deployment update once, and a
// manual one show the update without applying it; taking the newer plugin away again
// makes the update a downgrade, which the version guard refuses before anything changes.
func TestUpdatesFollowTheirPolicies(t *testing.T) {
	plugins := pluginsCopy(t)
	h := startHost(t, "FEDHOST_PLUGIN_DIR="+plugins, "FEDHOST_UPDATE_CHECK_INTERVAL=1s")
	auto, manual, window := h.create("auto"), h.create("manual"), h.create("window")
	require.Equal(t, http.StatusOK, h.call("PUT", "/deployments/"+auto.ID+"/update-policy", map[string]any{"policy": "automatic"}, nil))
	// A window that opens in six hours: nothing happens outside it.
	opens := time.Now().In(time.FixedZone("", 0)).Add(6 * time.Hour).Format("15:04")
	require.Equal(t, http.StatusOK, h.call("PUT", "/deployments/"+window.ID+"/update-policy",
		map[string]any{"policy": "window", "window_start": opens, "window_minutes": 15, "time_zone": "UTC"}, nil))
	// The automatic one has an option the newer plugin renames (httpClientTimeout is
	// fetcher.timeout from 2.3.6): its update must carry the value over.
	require.Equal(t, "succeeded", h.wait(h.submit(auto.ID, minifluxConfig("auto.example.org", map[string]any{"httpClientTimeout": 45})).ID).State)
	for _, d := range []deployment{manual, window} {
		require.Equal(t, "succeeded", h.wait(h.submit(d.ID, minifluxConfig(d.Namespace+".example.org", nil)).ID).State)
	}
	first := h.revision(auto.ID).CatalogRevision
	require.NotEmpty(t, first)
	require.Equal(t, first, h.revision(manual.ID).CatalogRevision)
	require.Nil(t, h.revision(manual.ID).UpdateAvailable)

	// A newer plugin version beside the old one.
	h.stop()
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version=2.3.6",
		"-o", filepath.Join(plugins, "fedhost-app-miniflux_2.3.6"), "../../plugins/apps/miniflux").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lock(t, plugins)
	h.start()

	require.Eventually(t, func() bool {
		bs := h.builds(auto.ID)
		return len(bs) == 2 && bs[0].State == "succeeded"
	}, 2*time.Minute, 200*time.Millisecond, "the automatic deployment did not update")
	second := h.revision(auto.ID).CatalogRevision
	require.NotEqual(t, first, second)
	var updated struct {
		Config struct {
			Apps map[string]struct {
				Options map[string]any `json:"options"`
			} `json:"apps"`
		} `json:"config"`
	}
	require.Equal(t, http.StatusOK, h.call("GET", "/deployments/"+auto.ID, nil, &updated))
	opts := updated.Config.Apps["miniflux"].Options
	require.NotContains(t, opts, "httpClientTimeout", "the renamed option left its old name")
	require.Equal(t, map[string]any{"timeout": 45.0, "allowPrivateNetworks": false}, opts["fetcher"], "the renamed option kept its value")
	time.Sleep(4 * time.Second) // several ticks
	require.Len(t, h.builds(auto.ID), 2, "one automatic update per revision")
	m := h.revision(manual.ID)
	require.Equal(t, first, m.CatalogRevision)
	require.NotNil(t, m.UpdateAvailable, "a manual deployment shows the update")
	require.Equal(t, second, m.UpdateAvailable.To)
	require.Len(t, h.builds(manual.ID), 1, "and does not apply it")
	require.Len(t, h.builds(window.ID), 1, "a window deployment waits for its window")
	require.NotNil(t, h.revision(window.ID).UpdateAvailable)
	// Its window moved to now: the update is applied at the next tick.
	require.Equal(t, http.StatusOK, h.call("PUT", "/deployments/"+window.ID+"/update-policy",
		map[string]any{"policy": "window", "window_start": time.Now().UTC().Add(-time.Minute).Format("15:04"), "window_minutes": 15, "time_zone": "UTC"}, nil))
	require.Eventually(t, func() bool {
		bs := h.builds(window.ID)
		return len(bs) == 2 && bs[0].State == "succeeded"
	}, 2*time.Minute, 200*time.Millisecond, "the window deployment did not update inside its window")
	require.Equal(t, second, h.revision(window.ID).CatalogRevision)
	var events []struct {
		Action       string `json:"action"`
		Result       string `json:"result"`
		DeploymentID string `json:"deployment_id"`
	}
	require.Equal(t, http.StatusOK, h.call("GET", "/audit-events?limit=1000", nil, &events))
	var audited int
	for _, e := range events {
		if e.Action == "automatic_update" && e.DeploymentID == auto.ID && e.Result == "ok" {
			audited++
		}
	}
	require.Equal(t, 1, audited)

	// The newer plugin goes away: the newest revision is the older one, a downgrade.
	// A clean stop restarts the node at the next start: what must not change is its spec.
	spec := h.nodeSpecHash("auto", "miniflux-web")
	h.stop()
	require.NoError(t, os.Remove(filepath.Join(plugins, "fedhost-app-miniflux_2.3.6")))
	lock(t, plugins)
	h.start()
	require.Eventually(t, func() bool {
		bs := h.builds(auto.ID)
		return len(bs) == 3 && (bs[0].State == "failed" || bs[0].State == "succeeded")
	}, 2*time.Minute, 200*time.Millisecond, "no update of the automatic deployment was tried")
	refused := h.wait(h.builds(auto.ID)[0].ID)
	require.Equal(t, "failed", refused.State)
	require.Contains(t, refused.Reason, "2.3.6")
	require.Contains(t, refused.Reason, "2.3.5")
	for _, e := range refused.Events {
		require.False(t, strings.HasPrefix(e.Message, "creating ") || strings.HasPrefix(e.Message, "changing "), "the refused update changed %s", e.Message)
	}
	require.Equal(t, spec, h.nodeSpecHash("auto", "miniflux-web"), "Miniflux's node is untouched")
}
