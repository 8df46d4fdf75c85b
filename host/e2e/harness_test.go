package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
)

// binDir holds fedhost, plugins/ and artifacts/, built once per test binary.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fedhost-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	if err := buildAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	pgtest.Stop() // the cluster tests' PostgreSQL, if one ran
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildAll(dir string) error {
	root := "../.."
	targets := map[string]string{
		"fedhost":                             "./host",
		"plugins/fedhost-resource-embedded":   "./plugins/resources/embedded",
		"plugins/fedhost-resource-local":      "./plugins/resources/local",
		"plugins/fedhost-resource-postgresql": "./plugins/resources/postgresql",
		"plugins/fedhost-resource-versitygw":  "./plugins/resources/versitygw",
		"plugins/fedhost-resource-localca":    "./plugins/resources/localca",
		"plugins/fedhost-resource-caddy":      "./plugins/resources/caddy",
		"plugins/fedhost-resource-rfc2136":    "./plugins/resources/rfc2136",
		"plugins/fedhost-resource-acme":       "./plugins/resources/acme",
		"plugins/fedhost-resource-openldap":   "./plugins/resources/openldap",
		"plugins/fedhost-resource-builtin":    "./plugins/resources/builtin",
		"plugins/fedhost-resource-ssh":        "./plugins/resources/ssh",
		"plugins/fedhost-resource-terraform":  "./plugins/resources/terraform",
		"plugins/fedhost-app-miniflux":        "./plugins/apps/miniflux",
		"plugins/fedhost-app-mastodon":        "./plugins/apps/mastodon",
		"artifacts/miniflux":                  "miniflux.app/v2",
		"artifacts/fedhost-miniflux-api":      "./plugins/apps/miniflux/cmd/fedhost-miniflux-api",
		"artifacts/versitygw":                 "github.com/versity/versitygw/cmd/versitygw",
		"artifacts/caddy":                     "github.com/caddyserver/caddy/v2/cmd/caddy",
	}
	for out, pkg := range targets {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "fedhost"), "plugins", "lock")
	cmd.Env = append(os.Environ(), "FEDHOST_PLUGIN_DIR="+filepath.Join(dir, "plugins"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("plugins lock: %v\n%s", err, b)
	}
	return nil
}

// host is one fedhost serve process on a data dir.
type host struct {
	t       testing.TB
	dataDir string
	addr    string
	cmd     *exec.Cmd
	log     *lockedBuffer
	logs    []string // every log of every run of this host
	// token is the API token of the first superuser, made at the first start.
	token string
	// env is added to serve's environment after the defaults, and wins over them.
	env []string
	// exited is closed when the running serve process ends.
	exited chan struct{}
	// httpsPort and httpPort are the front door's, its own for each host so that hosts
	// of parallel tests do not share one.
	httpsPort, httpPort int
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

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startHost runs fedhost serve on a fresh data dir below a 0755 dir (the managed
// PostgreSQL runs as an unprivileged user and must reach it).
func startHost(t testing.TB, env ...string) *host {
	dir, err := os.MkdirTemp("", "fedhost-e2e-data-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	h := &host{t: t, dataDir: filepath.Join(dir, "data"), addr: "127.0.0.1:" + strconv.Itoa(freePort(t)), env: env,
		httpsPort: freePort(t)}
	// The kernel may hand a port just closed out again: the front door's two must differ.
	for h.httpPort = freePort(t); h.httpPort == h.httpsPort; h.httpPort = freePort(t) {
	}
	t.Cleanup(func() {
		h.stop()
		killNodes(h.dataDir)
		os.RemoveAll(dir)
	})
	h.start()
	return h
}

func (h *host) start() {
	t := h.t
	// Another test binary may take the free port between its choice and serve's bind;
	// then serve exits saying so, and a new port is tried.
	for attempt := 0; ; attempt++ {
		if h.run() {
			break
		}
		require.Less(t, attempt, 5, "fedhost serve could not listen:\n%s", h.log)
		h.addr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	if h.token == "" {
		h.token = h.adminToken()
	}
}

// run starts serve and waits for its own "serving" line; false means the port was taken.
func (h *host) run() bool {
	t := h.t
	h.log = &lockedBuffer{}
	h.cmd = exec.Command(filepath.Join(binDir, "fedhost"), "serve")
	h.cmd.Env = append(os.Environ(),
		"FEDHOST_DATA_DIR="+h.dataDir,
		"FEDHOST_LISTEN="+h.addr,
		"FEDHOST_PLUGIN_DIR="+filepath.Join(binDir, "plugins"),
		"FEDHOST_LOG_LEVEL=debug",
		"FEDHOST_FRONT_DOOR_HTTPS_PORT="+strconv.Itoa(h.httpsPort),
		"FEDHOST_FRONT_DOOR_HTTP_PORT="+strconv.Itoa(h.httpPort),
	)
	h.cmd.Env = append(h.cmd.Env, h.env...)
	h.cmd.Dir = t.TempDir()
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	require.NoError(t, h.cmd.Start())
	exited := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(exited) }()
	serving := "serving: address=http://" + h.addr + " "
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(h.log.String(), serving) {
			h.exited = exited
			return true
		}
		select {
		case <-exited:
			h.cmd = nil
			require.Contains(t, h.log.String(), "address already in use", "fedhost serve exited:\n%s", h.log)
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("fedhost serve did not come up:\n%s", h.log)
	return false
}

var firstPassword = regexp.MustCompile(`one-time password\s+(\S+)`)

// adminToken makes an API token of admin on the command line, as the README's quick
// start does: the one-time password of the first start stays unchanged for the tests
// that sign in with it (and are then asked to change it).
func (h *host) adminToken() string {
	cmd := exec.Command(filepath.Join(binDir, "fedhost"), "users", "token", "admin", "--name", "e2e", "--days", "1")
	cmd.Env, cmd.Dir = h.cmd.Env, h.cmd.Dir
	out, err := cmd.Output()
	require.NoError(h.t, err, "fedhost users token admin")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	token := lines[len(lines)-1]
	require.True(h.t, strings.HasPrefix(token, "fh_"), "fedhost users token printed %q", out)
	return token
}

// stop ends serve gracefully.
func (h *host) stop() { h.stopWith(syscall.SIGTERM) }

// stopWith ends serve with sig, SIGINT (Ctrl-C) or SIGTERM, and waits for it to exit.
func (h *host) stopWith(sig syscall.Signal) {
	if h.cmd == nil || h.cmd.Process == nil {
		return
	}
	_ = h.cmd.Process.Signal(sig)
	select {
	case <-h.exited:
	case <-time.After(60 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
	h.logs = append(h.logs, h.log.String())
	h.cmd = nil
}

// kill ends serve with SIGKILL, as a crash would.
func (h *host) kill() {
	require.NoError(h.t, h.cmd.Process.Signal(syscall.SIGKILL))
	<-h.exited
	h.logs = append(h.logs, h.log.String())
	h.cmd = nil
}

// killNodes stops the app processes the local provider left running (they outlive a host
// that is killed; a clean stop ends them).
func killNodes(dataDir string) {
	states, _ := filepath.Glob(filepath.Join(dataDir, "plugins", "local", "nodes", "*", "*", "state.json"))
	for _, s := range states {
		var st struct {
			PID int `json:"pid"`
		}
		if b, err := os.ReadFile(s); err == nil && json.Unmarshal(b, &st) == nil && st.PID > 0 {
			_ = syscall.Kill(-st.PID, syscall.SIGKILL)
			_ = syscall.Kill(st.PID, syscall.SIGKILL)
		}
	}
}

// call sends a JSON request to the API and decodes the answer into out (if not nil).
func (h *host) call(method, path string, body any, out any) int {
	h.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(h.t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, "http://"+h.addr+"/api/v1"+path, r)
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	if out != nil {
		require.NoError(h.t, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
	return resp.StatusCode
}

type deployment struct {
	ID        string                       `json:"id"`
	Namespace string                       `json:"namespace"`
	State     string                       `json:"state"`
	Config    json.RawMessage              `json:"config"`
	Nodes     map[string]map[string]string `json:"nodes"`
	// SecretsSet are the pointers of the writeOnly options that have a stored value.
	SecretsSet []string `json:"secrets_set"`
	Resources  []struct {
		Name, Type, Provider, State string
	} `json:"resources"`
	Retained []struct {
		Name  string    `json:"name"`
		Until time.Time `json:"until"`
	} `json:"retained"`
	LastBuild *build `json:"last_build"`
}

type build struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Events []struct {
		Seq     int       `json:"seq"`
		Time    time.Time `json:"time"`
		Step    string    `json:"step"`
		Message string    `json:"message"`
	} `json:"events"`
}

type apiError struct {
	Error struct {
		Code, Message, Location string
	} `json:"error"`
}

func (h *host) create(namespace string) deployment {
	var d deployment
	require.Equal(h.t, http.StatusCreated, h.call("POST", "/deployments", map[string]string{"namespace": namespace}, &d))
	return d
}

func (h *host) submit(id string, config any) build {
	var b build
	code := h.call("POST", "/deployments/"+id+"/submit", config, &b)
	require.Equal(h.t, http.StatusAccepted, code, "submit: %+v", b)
	return b
}

func (h *host) deployment(id string) deployment {
	var d deployment
	require.Equal(h.t, http.StatusOK, h.call("GET", "/deployments/"+id, nil, &d))
	return d
}

// wait polls a build until it is finished and returns it.
func (h *host) wait(id string) build {
	h.t.Helper()
	var b build
	require.Eventually(h.t, func() bool {
		b = build{}
		h.call("GET", "/builds/"+id, nil, &b)
		return b.State == "succeeded" || b.State == "failed" || b.State == "canceled"
	}, 4*time.Minute, 100*time.Millisecond, "build %s did not finish", id)
	return b
}

func (h *host) nodeDir(namespace, node string) string {
	return filepath.Join(h.dataDir, "plugins", "local", "nodes", namespace, node)
}

func (h *host) nodeFile(namespace, node, file string) string {
	b, err := os.ReadFile(filepath.Join(h.nodeDir(namespace, node), file))
	require.NoError(h.t, err)
	return string(b)
}

func minifluxConfig(domain string, options map[string]any) map[string]any {
	app := map[string]any{"enable": true}
	if options != nil {
		app["options"] = options
	}
	return map[string]any{"domain": domain, "apps": map[string]any{"miniflux": app}}
}
