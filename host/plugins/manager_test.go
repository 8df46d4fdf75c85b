package plugins_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/resource"
)

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// echoBinaries builds the echo test plugin once: fedhost-resource-echo (1.0.0),
// fedhost-resource-echo_1.1.0, and fedhost-resource-nodes, which serves instance.
func echoBinaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "fedhost-plugins-test-")
		if buildErr != nil {
			return
		}
		for file, ldflags := range map[string]string{
			"fedhost-resource-echo":       "-X main.version=1.0.0",
			"fedhost-resource-echo_1.1.0": "-X main.version=1.1.0",
			"fedhost-resource-nodes":      "-X main.name=nodes -X main.serves=instance",
		} {
			out, err := exec.Command("go", "build", "-ldflags", ldflags,
				"-o", filepath.Join(builtDir, file), "./testdata/echo").CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build: %v\n%s", err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return builtDir
}

// pluginDir copies the named test binaries into a fresh plugin directory.
func pluginDir(t *testing.T, files ...string) string {
	t.Helper()
	src := echoBinaries(t)
	dir := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o755))
	}
	return dir
}

func lockAll(t *testing.T, dir string) {
	t.Helper()
	bins, err := plugins.Discover(dir)
	require.NoError(t, err)
	lock := plugins.Lock{}
	for _, b := range bins {
		sum, err := client.FileSHA256(b.Path)
		require.NoError(t, err)
		lock[b.File] = sum
	}
	require.NoError(t, lock.Write(dir))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newManager(t *testing.T, dir string, logs *syncBuffer) *plugins.Manager {
	t.Helper()
	m, err := plugins.New(plugins.Options{
		Dir:            dir,
		DataDir:        t.TempDir(),
		Logger:         hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
		Settings:       func(sdk.Description) (json.RawMessage, bool) { return json.RawMessage(`{"greeting":"hi"}`), true },
		HealthInterval: 100 * time.Millisecond,
		ExitPoll:       20 * time.Millisecond,
		MinBackoff:     20 * time.Millisecond,
		MaxBackoff:     200 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m
}

func TestDiscoverFindsVersionsSideBySide(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t, "fedhost-resource-echo", "fedhost-resource-echo_1.1.0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fedhost-app-notexecutable"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o755))

	bins, err := plugins.Discover(dir)
	require.NoError(t, err)
	require.Len(t, bins, 2)
	require.Equal(t, "resource/echo", bins[0].ID())
	require.Equal(t, "resource/echo@1.1.0", bins[1].ID())
}

func TestManagerStartsLockedPluginsAndReemitsTheirLogs(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t, "fedhost-resource-echo", "fedhost-resource-echo_1.1.0")
	lockAll(t, dir)
	logs := &syncBuffer{}
	m := newManager(t, dir, logs)
	require.NoError(t, m.Start(context.Background()))

	newest, ok := m.Find(sdk.KindResource, "echo", "")
	require.True(t, ok)
	require.Equal(t, "1.1.0", newest.Description().Version)
	older, ok := m.Find(sdk.KindResource, "echo", "1.0.0")
	require.True(t, ok)
	require.Equal(t, plugins.StateHealthy, older.Status().State)

	c, err := newest.Client()
	require.NoError(t, err)
	// Larger than gRPC's 4 MiB default, both ways.
	big := []byte(`"` + strings.Repeat("x", 20<<20) + `"`)
	res, err := c.Resource().Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "big", Type: "echo", Spec: big})
	require.NoError(t, err)
	require.Equal(t, len(big), len(res.Data))

	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "configured by the host")
	}, 5*time.Second, 20*time.Millisecond)
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "configured by the host") {
			line = l
		}
	}
	require.Contains(t, line, "echo", "the re-emitted line names the plugin")
	require.Contains(t, line, "settings_bytes=17")
}

func TestManagerRefusesUnlockedAndChangedBinaries(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t, "fedhost-resource-echo")
	m := newManager(t, dir, &syncBuffer{})
	err := m.Start(context.Background())
	require.ErrorContains(t, err, filepath.Join(dir, "fedhost-resource-echo")+" is not in plugins.lock")

	lockAll(t, dir)
	lock, err := plugins.ReadLock(dir)
	require.NoError(t, err)
	want := lock["fedhost-resource-echo"]
	f, err := os.OpenFile(filepath.Join(dir, "fedhost-resource-echo"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("tampered"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err := client.FileSHA256(filepath.Join(dir, "fedhost-resource-echo"))
	require.NoError(t, err)

	m = newManager(t, dir, &syncBuffer{})
	err = m.Start(context.Background())
	var cs *client.ChecksumError
	require.ErrorAs(t, err, &cs)
	msg := err.Error()
	require.NotContains(t, msg, "\n", "one line")
	require.Contains(t, msg, filepath.Join(dir, "fedhost-resource-echo"))
	require.Contains(t, msg, want)
	require.Contains(t, msg, got)
}

func TestManagerRestartsACrashedPlugin(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t, "fedhost-resource-echo")
	lockAll(t, dir)
	logs := &syncBuffer{}
	m := newManager(t, dir, logs)
	require.NoError(t, m.Start(context.Background()))
	p := m.Plugins()[0]
	c, err := p.Client()
	require.NoError(t, err)
	pid := c.Pid()
	require.NotZero(t, pid)

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		st := p.Status()
		return st.State == plugins.StateHealthy && st.Restarts == 1
	}, 10*time.Second, 20*time.Millisecond)
	c2, err := p.Client()
	require.NoError(t, err)
	require.NotEqual(t, pid, c2.Pid())
	_, err = c2.Resource().Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "a", Type: "echo", Spec: []byte(`{}`)})
	require.NoError(t, err)
	require.Contains(t, logs.String(), "plugin failed, restarting")
	require.Contains(t, logs.String(), "plugin restarted")
}

func TestPluginRejectsSettingsThatBreakItsSchema(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t, "fedhost-resource-echo")
	lockAll(t, dir)
	m, err := plugins.New(plugins.Options{
		Dir:      dir,
		Settings: func(sdk.Description) (json.RawMessage, bool) { return json.RawMessage(`{"greeting":90417263}`), true },
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	err = m.Start(context.Background())
	require.Error(t, err)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "settings/greeting", sdk.FieldOf(err))
	require.NotContains(t, err.Error(), "90417263", "errors never echo a settings value")
}

// Stop stops the instance providers first, so that no node outlives the managed servers
// of the other providers: "nodes" stops before "echo", which comes first in the directory.
func TestManagerStopsInstanceProvidersFirst(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t, "fedhost-resource-echo", "fedhost-resource-nodes")
	lockAll(t, dir)
	dataDir := t.TempDir()
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: dataDir})
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	m.Stop()
	stopped := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(dataDir, "plugins", name, "stopped"))
		require.NoError(t, err, "%s did not stop gracefully", name)
		n, err := strconv.ParseInt(string(b), 10, 64)
		require.NoError(t, err)
		return n
	}
	require.Less(t, stopped("nodes"), stopped("echo"), "the instance provider stopped after another")
}
