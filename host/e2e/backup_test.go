package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// minifluxAPI calls Miniflux's own API as its admin.
func minifluxAPI(t testing.TB, addr, user, password, method, path string, body any) (int, []byte) {
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(raw))
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

func categories(t *testing.T, addr, password string) []string {
	code, body := minifluxAPI(t, addr, "admin", password, "GET", "/v1/categories", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var list []struct {
		Title string `json:"title"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	var out []string
	for _, c := range list {
		out = append(out, c.Title)
	}
	return out
}

func feeds(t *testing.T, addr, password string) []string {
	code, body := minifluxAPI(t, addr, "admin", password, "GET", "/v1/feeds", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var list []struct {
		FeedURL string `json:"feed_url"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	var out []string
	for _, f := range list {
		out = append(out, f.FeedURL)
	}
	return out
}

const rss = `<?xml version="1.0"?>
<rss version="2.0"><channel><title>Instance news</title><link>https://news.example.org/</link>
<description>News</description>
<item><title>Version 4.2 is out</title><link>https://news.example.org/4.2</link><guid>4.2</guid></item>
</channel></rss>`

// Miniflux data made through its own API (a category and a feed in it) is backed up,
// lost, restored and there again.
func TestBackupAndRestoreBringBackMinifluxData(t *testing.T) {
	feedServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(rss))
	}))
	defer feedServer.Close()
	h := startHost(t)
	d := h.create("keep")
	// The feed is on loopback: Miniflux refuses private addresses unless told.
	options := map[string]any{"fetcherAllowPrivateNetworks": true}
	require.Equal(t, "succeeded", h.wait(h.submit(d.ID, minifluxConfig("keep.example.org", options)).ID).State)
	addr := h.deployment(d.ID).Nodes["miniflux-web"]["http"]
	password := h.nodeFile("keep", "miniflux-web", "admin-password")

	code, body := minifluxAPI(t, addr, "admin", password, "POST", "/v1/categories", map[string]string{"title": "Fediverse news"})
	require.Equal(t, http.StatusCreated, code, "%s", body)
	var category struct {
		ID int `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &category))
	require.Contains(t, categories(t, addr, password), "Fediverse news")
	code, body = minifluxAPI(t, addr, "admin", password, "POST", "/v1/feeds", map[string]any{"feed_url": feedServer.URL + "/rss", "category_id": category.ID})
	require.Equal(t, http.StatusCreated, code, "%s", body)
	require.Contains(t, feeds(t, addr, password), feedServer.URL+"/rss")

	var refused apiError
	require.Equal(t, http.StatusNotFound, h.call("POST", "/deployments/"+d.ID+"/operations/backup", map[string]string{"app": "peertube"}, &refused))
	require.Equal(t, "/app", refused.Error.Location, "an app without data is refused before a build is queued")

	var b build
	require.Equal(t, http.StatusAccepted, h.call("POST", "/deployments/"+d.ID+"/operations/backup", map[string]string{"app": "miniflux"}, &b))
	done := h.wait(b.ID)
	require.Equal(t, "succeeded", done.State, "%+v", done)
	var backups []struct {
		ID       string `json:"id"`
		Database string `json:"database"`
	}
	require.Equal(t, http.StatusOK, h.call("GET", "/deployments/"+d.ID+"/backups?app=miniflux", nil, &backups))
	require.Len(t, backups, 1)
	require.Equal(t, "keep-miniflux-db", backups[0].Database)

	// The data is lost...
	var list []struct {
		ID    int    `json:"id"`
		Title string `json:"title"`
	}
	code, body = minifluxAPI(t, addr, "admin", password, "GET", "/v1/categories", nil)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(body, &list))
	for _, c := range list {
		if c.Title == "Fediverse news" {
			code, body = minifluxAPI(t, addr, "admin", password, "DELETE", "/v1/categories/"+itoa(c.ID), nil)
			require.Equal(t, http.StatusNoContent, code, "%s", body)
		}
	}
	require.NotContains(t, categories(t, addr, password), "Fediverse news")
	require.Empty(t, feeds(t, addr, password), "the feed went with its category")

	// ...and restored, with the CLI: the list of backups, then a restore that waits.
	out := h.cli("deployments", "backups", d.ID, "--app", "miniflux")
	require.Contains(t, out, backups[0].ID)
	require.Contains(t, out, "manual")
	out = h.cli("deployments", "restore", d.ID, "--app", "miniflux", "--snapshot", backups[0].ID, "--wait")
	require.Regexp(t, `build \S+ succeeded`, out)
	require.Contains(t, categories(t, addr, password), "Fediverse news")
	require.Contains(t, feeds(t, addr, password), feedServer.URL+"/rss")
	out = h.cli("deployments", "status", d.ID)
	require.Regexp(t, `backups\s+miniflux\s+@daily, last good \S+ \(`+backups[0].ID+`\)\n`, out, "status says where the backups stand")

	// A restore drill restores the newest backup into a scratch database, finds Miniflux's
	// tables and rows there, and removes it; the live data is untouched.
	drill := func() (build, backupStatus) {
		var b build
		require.Equal(t, http.StatusAccepted, h.call("POST", "/deployments/"+d.ID+"/operations/drill", map[string]string{"app": "miniflux"}, &b))
		done := h.wait(b.ID)
		var dep struct {
			Backups   []backupStatus `json:"backups"`
			Resources []struct{ Name string }
		}
		require.Equal(t, http.StatusOK, h.call("GET", "/deployments/"+d.ID, nil, &dep))
		require.Len(t, dep.Backups, 1)
		for _, r := range dep.Resources {
			require.NotEqual(t, "miniflux-drill", r.Name, "the scratch database is removed")
		}
		return done, dep.Backups[0]
	}
	done, status := drill()
	require.Equal(t, "succeeded", done.State, "%+v", done)
	require.NotNil(t, status.LastGoodDrillAt)
	require.Empty(t, status.DrillError)
	require.Equal(t, backups[0].ID, status.DrillSnapshot)
	require.Greater(t, status.DrillTables, 10, "Miniflux's schema has its tables")
	require.Positive(t, status.DrillRows, "the feed, its category and the user are rows")
	require.Contains(t, categories(t, addr, password), "Fediverse news")
	metrics := h.metrics()
	require.Contains(t, metrics, "fedhost_restore_drills_failed 0")
	require.Contains(t, metrics, `fedhost_restore_drill_last_success_timestamp_seconds{app="miniflux",deployment="`+d.ID+`"}`)

	// A repository that lost its data does not restore: the drill fails and says so,
	// as a failed backup does, and the last good drill stays on record.
	packs, err := filepath.Glob(filepath.Join(h.dataDir, "plugins", "versitygw", "*", "data", "*", "miniflux", "data", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, packs, "the repository's pack directories in the managed versitygw")
	for _, p := range packs {
		require.NoError(t, os.RemoveAll(p))
	}
	done, status = drill()
	require.Equal(t, "failed", done.State, "%+v", done)
	require.Contains(t, status.DrillError, "restore drill of miniflux")
	require.NotNil(t, status.LastGoodDrillAt, "the last good drill is kept")
	require.Contains(t, h.metrics(), "fedhost_restore_drills_failed 1")

	// A redeploy keeps the repository's password, so the backups stay readable.
	options["pollingFrequency"] = 30
	require.Equal(t, "succeeded", h.wait(h.submit(d.ID, minifluxConfig("keep.example.org", options)).ID).State)
	require.Equal(t, http.StatusOK, h.call("GET", "/deployments/"+d.ID+"/backups?app=miniflux", nil, &backups))
	require.Len(t, backups, 1)
}

// metrics scrapes the host's /metrics, open on loopback by default.
func (h *host) metrics() string {
	h.t.Helper()
	resp, err := http.Get("http://" + h.addr + "/metrics")
	require.NoError(h.t, err)
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "%s", out.String())
	return out.String()
}

// cli runs the fedhost binary's command line against this host's API.
func (h *host) cli(args ...string) string {
	h.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "fedhost"), args...)
	cmd.Env = append(os.Environ(), "FEDHOST_SERVER=http://"+h.addr, "FEDHOST_TOKEN="+h.token)
	cmd.Dir = h.t.TempDir()
	out, err := cmd.CombinedOutput()
	require.NoError(h.t, err, "fedhost %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
