package cli_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	fedhostBin string
	echoBin    string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fedhost-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fedhostBin = filepath.Join(dir, "fedhost")
	echoBin = filepath.Join(dir, "fedhost-resource-echo")
	for out, pkg := range map[string]string{fedhostBin: "../", echoBin: "../plugins/testdata/echo"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, b)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// setup makes a plugin dir holding the echo plugin and a data dir, and returns the
// environment that points fedhost at them.
func setup(t *testing.T) (pluginDir string, env []string) {
	t.Helper()
	pluginDir = t.TempDir()
	data, err := os.ReadFile(echoBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(pluginDir, "fedhost-resource-echo"), data, 0o755))
	env = append(os.Environ(),
		"FEDHOST_PLUGIN_DIR="+pluginDir,
		"FEDHOST_DATA_DIR="+t.TempDir(),
		"FEDHOST_LISTEN=127.0.0.1:"+strconv.Itoa(freePort(t)),
	)
	return pluginDir, env
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(fedhostBin, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errb.String(), 0
}

func tamper(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("changed")
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestPluginsLockListCheck(t *testing.T) {
	t.Parallel()
	dir, env := setup(t)

	out, _, code := run(t, env, "plugins", "list")
	require.Equal(t, 0, code)
	require.Regexp(t, `echo\s+resource\s+-\s+-\s+unlocked\s+not started`, out)

	out, _, code = run(t, env, "plugins", "lock")
	require.Equal(t, 0, code)
	require.Contains(t, out, "locked 1 plugins")

	out, stderr, code := run(t, env, "plugins", "list")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `NAME\s+KIND\s+VERSION\s+PROTOCOL\s+CHECKSUM\s+HEALTH`, out)
	require.Regexp(t, `echo\s+resource\s+1\.0\.0\s+1\s+locked\s+healthy`, out)

	_, _, code = run(t, env, "plugins", "check")
	require.Equal(t, 0, code)

	binary := filepath.Join(dir, "fedhost-resource-echo")
	tamper(t, binary)
	_, stderr, code = run(t, env, "plugins", "check")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	require.Contains(t, stderr, binary)
	require.Contains(t, stderr, "does not match plugins.lock")

	_, stderr, code = run(t, env, "serve")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "fedhost: plugin "+binary)
	require.Contains(t, stderr, "does not match plugins.lock")
}

func TestServeKilledLeavesNoPlugin(t *testing.T) {
	t.Parallel()
	dir, env := setup(t)
	_, _, code := run(t, env, "plugins", "lock")
	require.Equal(t, 0, code)

	cmd := exec.Command(fedhostBin, "serve")
	cmd.Env = env
	cmd.Dir = t.TempDir()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	listen := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "FEDHOST_LISTEN="); ok {
			listen = v
		}
	}
	// Its own "serving" line, not just an answer on the port: another test binary may
	// have taken the port between its choice and serve's bind.
	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), "serving: address=http://"+listen+" ")
	}, 30*time.Second, 50*time.Millisecond, "serve did not come up: %s", stderr)
	resp, err := http.Get("http://" + listen + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	// metrics = "loopback" by default: this test's peer is 127.0.0.1.
	resp, err = http.Get("http://" + listen + "/metrics")
	require.NoError(t, err)
	scraped, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", scraped)
	require.Contains(t, string(scraped), `fedhost_plugin_starts_total{plugin="echo"} 1`)
	require.Contains(t, string(scraped), `fedhost_http_requests_total{route="/healthz",status="200"} 1`)

	binary := filepath.Join(dir, "fedhost-resource-echo")
	require.NotEmpty(t, processesOf(t, binary), "the plugin runs under serve")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Eventually(t, func() bool { return len(processesOf(t, binary)) == 0 },
		5*time.Second, 50*time.Millisecond, "a plugin outlived its host")
}

// processesOf lists the pids whose executable is path.
func processesOf(t *testing.T, path string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == path {
			if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !isZombie(stat) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func isZombie(stat []byte) bool {
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func TestConfigErrorNamesFileAndLine(t *testing.T) {
	t.Parallel()
	_, env := setup(t)
	file := filepath.Join(t.TempDir(), "fedhost.hcl")
	require.NoError(t, os.WriteFile(file, []byte("listen = \"127.0.0.1:1\"\nlisen = \"x\"\n"), 0o644))
	_, stderr, code := run(t, env, "--config", file, "plugins", "list")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "fedhost.hcl:2,")
	require.Contains(t, stderr, `"lisen"`)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, os.Environ(), "version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "plugin protocol 1")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
