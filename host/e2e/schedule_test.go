package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type backupStatus struct {
	App           string     `json:"app"`
	Schedule      string     `json:"schedule"`
	NextAt        *time.Time `json:"next_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	LastTrigger   string     `json:"last_trigger"`
	LastBuildID   string     `json:"last_build_id"`
	LastSuccessAt *time.Time `json:"last_success_at"`
	LastSnapshot  string     `json:"last_snapshot"`
	LastError     string     `json:"last_error"`
	Failures      int        `json:"failures"`
	Stale         bool       `json:"stale"`
	// The newest restore drill.
	LastGoodDrillAt *time.Time `json:"last_good_drill_at"`
	DrillSnapshot   string     `json:"drill_snapshot"`
	DrillTables     int        `json:"drill_tables"`
	DrillRows       int64      `json:"drill_rows"`
	DrillError      string     `json:"drill_error"`
}

func (h *host) backupStatus(id string) backupStatus {
	h.t.Helper()
	var d struct {
		Backups []backupStatus `json:"backups"`
	}
	require.Equal(h.t, http.StatusOK, h.call("GET", "/deployments/"+id, nil, &d))
	require.Len(h.t, d.Backups, 1, "one app with data")
	return d.Backups[0]
}

type snapshot struct {
	ID   string            `json:"id"`
	Time time.Time         `json:"time"`
	Tags map[string]string `json:"tags"`
}

func (h *host) snapshots(id, app string) []snapshot {
	h.t.Helper()
	var out []snapshot
	require.Equal(h.t, http.StatusOK, h.call("GET", "/deployments/"+id+"/backups?app="+app, nil, &out))
	return out
}

// A backup schedule runs from what the database records: a failed scheduled backup is
// recorded and shown, and a backup that came due while no fedhost ran is taken as soon
// as fedhost is back, not a whole period after its start.
func TestScheduledBackupsFailShowAndSurviveARestart(t *testing.T) {
	const every = 24 * time.Second
	// restic fails in the first run: the backups bucket is "unreachable".
	broken := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(broken, "restic"), []byte("#!/bin/sh\necho 'Fatal: unable to open repository: simulated outage' >&2\nexit 1\n"), 0o755))
	base := []string{"FEDHOST_UPDATE_CHECK_INTERVAL=1s", "FEDHOST_BACKUP_SCHEDULE=@every " + every.String()}
	h := startHost(t, append(base, "PATH="+broken+":"+os.Getenv("PATH"))...)
	d := h.create("sched")
	require.Equal(t, "succeeded", h.wait(h.submit(d.ID, minifluxConfig("sched.example.org", nil)).ID).State)

	var s backupStatus
	require.Eventually(t, func() bool {
		s = h.backupStatus(d.ID)
		return s.Failures > 0
	}, 2*every+30*time.Second, 500*time.Millisecond, "no scheduled backup was tried")
	require.Equal(t, "scheduled", s.LastTrigger)
	require.Contains(t, s.LastError, "simulated outage", "the failure says why")
	require.Nil(t, s.LastSuccessAt)
	failed := h.wait(s.LastBuildID)
	require.Equal(t, "failed", failed.State)
	require.Contains(t, failed.Reason, "simulated outage")

	// fedhost stops past the next due time, and starts again with a working restic.
	h.stop()
	time.Sleep(time.Until(s.LastAttemptAt.Add(every + 2*time.Second)))
	h.env = base
	h.start()
	serving := time.Now() // from fedhost's "serving" line: how long a loaded machine takes to start is not the schedule's
	require.Eventually(t, func() bool {
		s = h.backupStatus(d.ID)
		return s.LastSuccessAt != nil
	}, 2*every+30*time.Second, 500*time.Millisecond, "no scheduled backup after the restart")
	if took := s.LastAttemptAt.Sub(serving); took >= every/2 {
		// What the scheduler did, so that a failure says why.
		for _, l := range strings.Split(h.log.String(), "\n") {
			if strings.Contains(l, "Gained leadership") || strings.Contains(l, "scheduler-tick") || strings.Contains(l, "backup") {
				t.Log(l)
			}
		}
		t.Fatalf("the backup missed while fedhost was down was taken %s after fedhost served, want at once (under %s), not a period (%s) after", took, every/2, every)
	}
	require.Equal(t, "scheduled", s.LastTrigger)
	require.Zero(t, s.Failures)
	require.Empty(t, s.LastError)
	require.False(t, s.Stale)
	snaps := h.snapshots(d.ID, "miniflux")
	require.NotEmpty(t, snaps)
	require.Equal(t, s.LastSnapshot, snaps[len(snaps)-1].ID)
	require.Equal(t, "scheduled", snaps[len(snaps)-1].Tags["trigger"])

	var events []struct {
		Action       string `json:"action"`
		Actor        string `json:"actor"`
		DeploymentID string `json:"deployment_id"`
	}
	require.Equal(t, http.StatusOK, h.call("GET", "/audit-events?limit=1000", nil, &events))
	var audited int
	for _, e := range events {
		if e.Action == "scheduled_backup" && e.DeploymentID == d.ID {
			audited++
		}
	}
	require.GreaterOrEqual(t, audited, 2, "each scheduled backup is audited")
}

// artifactsWith returns a plugin directory like pluginsCopy's whose artifacts directory
// also holds the given executables.
func pluginsWithArtifacts(t *testing.T, extra map[string]string) string {
	plugins := pluginsCopy(t)
	artifacts := filepath.Join(filepath.Dir(plugins), "artifacts")
	require.NoError(t, os.Remove(artifacts))
	require.NoError(t, os.Mkdir(artifacts, 0o755))
	entries, err := os.ReadDir(filepath.Join(binDir, "artifacts"))
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.Symlink(filepath.Join(binDir, "artifacts", e.Name()), filepath.Join(artifacts, e.Name())))
	}
	for name, content := range extra {
		require.NoError(t, os.WriteFile(filepath.Join(artifacts, name), []byte(content), 0o755))
	}
	return plugins
}

// brokenMiniflux is a Miniflux "2.4.0" whose start migrates the data destructively and
// then fails: the upgrade must bring the data and the old version back.
const brokenMiniflux = `#!/bin/sh
psql "$(cat "$DATABASE_URL_FILE")" -q -c 'DELETE FROM categories' >&2 || exit 3
echo 'miniflux 2.4.0: migration 118 failed: column "x" does not exist' >&2
exit 1
`

// An upgrade of an app with data takes a backup first; when the new version fails to
// start after it changed the data, the data of the old version is restored and the old
// version runs again.
func TestFailedUpgradeRestoresTheDataAndTheOldVersion(t *testing.T) {
	plugins := pluginsWithArtifacts(t, map[string]string{"miniflux-2.4.0": brokenMiniflux})
	h := startHost(t, "FEDHOST_PLUGIN_DIR="+plugins, "FEDHOST_UPDATE_CHECK_INTERVAL=1s")
	d := h.create("upgr")
	require.Equal(t, "succeeded", h.wait(h.submit(d.ID, minifluxConfig("upgr.example.org", nil)).ID).State)
	before := h.revision(d.ID).CatalogRevision
	addr := h.deployment(d.ID).Nodes["miniflux-web"]["http"]
	password := h.nodeFile("upgr", "miniflux-web", "admin-password")
	code, body := minifluxAPI(t, addr, "admin", password, "POST", "/v1/categories", map[string]string{"title": "Kept across a failed upgrade"})
	require.Equal(t, http.StatusCreated, code, "%s", body)

	h.stop()
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version=2.4.0 -X main.binary=miniflux-2.4.0",
		"-o", filepath.Join(plugins, "fedhost-app-miniflux_2.4.0"), "../../plugins/apps/miniflux").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lock(t, plugins)
	h.start()
	require.NotNil(t, h.revision(d.ID).UpdateAvailable)

	var b build
	require.Equal(t, http.StatusAccepted, h.call("POST", "/deployments/"+d.ID+"/submit?apply_updates=true", minifluxConfig("upgr.example.org", nil), &b))
	b = h.wait(b.ID)
	require.Equal(t, "failed", b.State)
	require.Contains(t, b.Reason, "migration 118 failed", "the reason gives the new version's own error")
	require.Contains(t, b.Reason, "rolled back miniflux 2.3.5 to 2.4.0")
	var messages []string
	for _, e := range b.Events {
		messages = append(messages, e.Step+": "+e.Message)
	}
	joined := strings.Join(messages, "\n")
	require.Contains(t, joined, "upgrade: stopping miniflux 2.3.5 to back up its data before the upgrade to 2.4.0")
	require.Contains(t, joined, "rollback: node miniflux-web is healthy")

	after := h.deployment(d.ID)
	require.Equal(t, "active", after.State, "the old version runs: the deployment is as before")
	require.Equal(t, before, h.revision(d.ID).CatalogRevision, "it stays on its revision")
	addr = after.Nodes["miniflux-web"]["http"]
	require.Contains(t, categories(t, addr, password), "Kept across a failed upgrade", "the data deleted by the failed start is back")
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", h.nodePID("upgr", "miniflux-web")))
	require.NoError(t, err)
	require.Equal(t, "miniflux", filepath.Base(exe), "the binary of 2.3.5 runs again, not miniflux-2.4.0")

	s := h.backupStatus(d.ID)
	require.Equal(t, "upgrade", s.LastTrigger)
	snaps := h.snapshots(d.ID, "miniflux")
	require.Len(t, snaps, 1)
	require.Equal(t, map[string]string{"deployment": "upgr", "app": "miniflux", "trigger": "upgrade", "from": "2.3.5", "to": "2.4.0"}, snaps[0].Tags)
}
