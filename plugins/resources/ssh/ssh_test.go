package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/internal/sshtest"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// Built and started once by TestMain: the plugin, the test node (the local driver's
// testdata/httpserver) as the artifact "httpserver" in artifactsDir, and sshd.
var (
	pluginBin, artifactsDir string
	sshd                    *sshtest.Server
)

const testToken = "tok-9c2e7a4b1d6f3e8a"

var testSecrets = map[string][]byte{"token": []byte(testToken)}

func TestMain(m *testing.M) {
	plugintest.MainWithServer(m, "sshd", func(dir string) (func(), error) {
		pluginBin = filepath.Join(dir, "bin", "fedhost-resource-ssh")
		artifactsDir = filepath.Join(dir, "artifacts")
		for _, b := range [][2]string{{pluginBin, "."}, {filepath.Join(artifactsDir, "httpserver"), "../local/testdata/httpserver"}} {
			if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
			}
		}
		// sh is the artifact the exec tests run.
		if err := os.Symlink("/bin/sh", filepath.Join(artifactsDir, "sh")); err != nil {
			return nil, err
		}
		sshDir := filepath.Join(dir, "sshd")
		if err := os.Mkdir(sshDir, 0o700); err != nil {
			return nil, err
		}
		s, stop, err := sshtest.Start(sshDir)
		if err != nil {
			return nil, err
		}
		sshd = s
		return func() {
			stop()
			pgtest.Stop() // the Miniflux test's PostgreSQL
		}, nil
	})
}

// settingsJSON names the test sshd as the one machine, with work_dir in a temporary
// directory of t; hostKey overrides the pinned key when not empty.
func settingsJSON(workDir, hostKey string) json.RawMessage {
	if hostKey == "" {
		hostKey = sshd.HostKey
	}
	b, _ := json.Marshal(map[string]any{
		"machines": []map[string]any{{
			"name": "test", "address": sshd.Addr, "user": sshd.User, "host_key": hostKey,
			"artifacts_dir": artifactsDir, "work_dir": workDir, "listen_host": "127.0.0.1",
		}},
		"private_key_file":        sshd.ClientKeyFile,
		"connect_timeout_seconds": 5,
	})
	return b
}

func nodeSpec(edit func(*contract.InstanceRequest)) json.RawMessage {
	spec := contract.InstanceRequest{
		Artifact: contract.Artifact{Binary: "httpserver"},
		Env:      map[string]string{"LISTEN_ADDR": "${host}:${port:http}", "DATA_DIR": "data", "TOKEN_FILE": "${file:token}"},
		Files:    map[string]contract.InstanceFile{"token": {Content: "${secret:token}\n"}},
		Ports:    []contract.Port{{Name: "http", Protocol: "http"}},
		Health:   &contract.Health{Port: "http", HTTPPath: "/healthz", IntervalSeconds: 1, TimeoutSeconds: 2, StartSeconds: 15},
		Volumes:  []contract.Volume{{Name: "data", Path: "data"}},
	}
	if edit != nil {
		edit(&spec)
	}
	b, _ := json.Marshal(spec)
	return b
}

func start(t testing.TB, settings json.RawMessage) *resource.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.Start(ctx, pluginBin, client.WithLogger(hclog.New(&hclog.LoggerOptions{Output: io.Discard})))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, settings))
	return p.Resource()
}

func get(addr, path string) (string, error) {
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

func data(method, addr, body string) (string, error) {
	req, err := http.NewRequest(method, "http://"+addr+"/data", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s /data: %s", method, resp.Status)
	}
	return string(b), nil
}

func addressOf(raw json.RawMessage) (string, error) {
	var r contract.InstanceResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", err
	}
	if r.Addresses["http"] == "" {
		return "", errors.New("the result has no http address")
	}
	return r.Addresses["http"], nil
}

func pidOf(t *testing.T, addr string) int {
	t.Helper()
	s, err := get(addr, "/pid")
	require.NoError(t, err)
	pid, err := strconv.Atoi(s)
	require.NoError(t, err)
	return pid
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestConformance(t *testing.T) {
	workDir := t.TempDir()
	wd := func(p conformance.Provisioned) string { return filepath.Join(workDir, p.Tenant, p.Instance) }
	conformance.Resource(t, pluginBin, conformance.ResourceCase{
		Type:         contract.Instance,
		Settings:     settingsJSON(workDir, ""),
		Request:      nodeSpec(nil),
		Secrets:      testSecrets,
		Invalid:      nodeSpec(func(s *contract.InstanceRequest) { s.Artifact = contract.Artifact{Image: "docker.io/library/nginx:1"} }),
		InvalidField: "request/artifact/image",
		Exec:         &conformance.ExecCase{Shell: "sh", EnvName: "DATA_DIR", EnvValue: "data"},
		Access: func(_ context.Context, from, to conformance.Provisioned) error {
			fromAddr, err := addressOf(from.Result)
			if err != nil {
				return err
			}
			toAddr, err := addressOf(to.Result)
			if err != nil {
				return err
			}
			want := fmt.Sprintf("written via %s at %d", from.Tenant, time.Now().UnixNano())
			if _, err := data(http.MethodPut, fromAddr, want); err != nil {
				return err
			}
			got, err := data(http.MethodGet, toAddr, "")
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s's node does not see what %s's node wrote", to.Tenant, from.Tenant)
			}
			return nil
		},
		Exists: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			_, err := os.Stat(wd(p))
			return err == nil, nil
		},
		Seed: func(_ context.Context, p conformance.Provisioned) error {
			addr, err := addressOf(p.Result)
			if err != nil {
				return err
			}
			_, err = data(http.MethodPut, addr, "seeded "+p.Tenant)
			return err
		},
		DataKept: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			b, err := os.ReadFile(filepath.Join(wd(p), "data", "data"))
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return err == nil && string(b) == "seeded "+p.Tenant, err
		},
	})
}

// A node runs on the machine, passes its health check, is left alone by a provision of
// the same spec, restarted by its supervisor after kill -9 and by a changed spec, and
// removed by deprovision.
func TestNodeLifecycle(t *testing.T) {
	workDir := t.TempDir()
	rc := start(t, settingsJSON(workDir, ""))
	ctx := context.Background()
	req := resource.Request{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	res, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	addr, err := addressOf(res.Data)
	require.NoError(t, err)
	wd := filepath.Join(workDir, "t1", "web")
	got, err := get(addr, "/wd")
	require.NoError(t, err)
	require.Equal(t, wd, got)
	for _, f := range []string{wd, filepath.Join(wd, "token")} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		if fi.IsDir() {
			require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), f)
		} else {
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
		}
	}
	pid := pidOf(t, addr)

	res2, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	require.JSONEq(t, string(res.Data), string(res2.Data))
	require.Equal(t, pid, pidOf(t, addr), "a provision of the same spec restarted the node")

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, 15*time.Second, "the supervisor did not restart the node after kill -9", func() bool {
		s, err := get(addr, "/pid")
		return err == nil && s != strconv.Itoa(pid)
	})
	pid = pidOf(t, addr)

	st, err := rc.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "ready", st.State)

	req.Spec = nodeSpec(func(s *contract.InstanceRequest) { s.Env["EXTRA"] = "1" })
	res3, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	require.JSONEq(t, string(res.Data), string(res3.Data), "a changed spec keeps the node's ports")
	require.NotEqual(t, pid, pidOf(t, addr), "a changed spec did not restart the node")
	pid = pidOf(t, addr)
	b, err := os.ReadFile(filepath.Join(wd, ".fedhost", "supervisor.pid"))
	require.NoError(t, err)
	supervisor, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)

	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: req.Spec}))
	_, err = os.Stat(wd)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.False(t, groupRunning(t, pid, false), "the node's process outlived deprovision")
	require.False(t, groupRunning(t, supervisor, true), "the supervisor's process group outlived deprovision")
	_, err = get(addr, "/healthz")
	require.Error(t, err)
	st, err = rc.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)
}

// groupRunning reports whether process id (or a process of group id) runs and is not a
// zombie: the machine's init reaps the ended processes of a stopped node in its own time.
func groupRunning(t *testing.T, id int, group bool) bool {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if (!group && pid == id) || (group && f[2] == strconv.Itoa(id)) {
			return true
		}
	}
	return false
}

// A host key other than the pinned one is refused, and the error shows both.
func TestChangedHostKeyRefused(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "other")).CombinedOutput()
	require.NoError(t, err, string(out))
	other, err := os.ReadFile(filepath.Join(dir, "other.pub"))
	require.NoError(t, err)
	rc := start(t, settingsJSON(filepath.Join(dir, "work"), strings.TrimSpace(string(other))))
	_, err = rc.Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets})
	require.Error(t, err)
	pinned, _, _, _, _ := ssh.ParseAuthorizedKey(other)
	real, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(sshd.HostKey))
	require.Contains(t, err.Error(), ssh.FingerprintSHA256(pinned))
	require.Contains(t, err.Error(), ssh.FingerprintSHA256(real))
	require.Contains(t, err.Error(), "host_key")
	_, serr := os.Stat(filepath.Join(dir, "work"))
	require.ErrorIs(t, serr, os.ErrNotExist, "the driver touched a machine whose host key it refused")
}

// A node that fails its start prints its token; the error shows its log with the
// token taken out.
func TestFailingNodeShowsItsLogWithoutTheSecret(t *testing.T) {
	workDir := t.TempDir()
	rc := start(t, settingsJSON(workDir, ""))
	spec := nodeSpec(func(s *contract.InstanceRequest) {
		s.Env["FAIL_START"] = "1"
		s.Health.StartSeconds = 3
	})
	req := resource.Request{Tenant: "t1", Instance: "bad", Type: contract.Instance, Spec: spec, Secrets: testSecrets}
	t.Cleanup(func() {
		_ = rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "t1", Instance: "bad", Type: contract.Instance})
	})
	_, err := rc.Provision(context.Background(), req)
	require.Error(t, err)
	require.Contains(t, err.Error(), "refusing to start with token [secret token]")
	require.NotContains(t, err.Error(), testToken)
}

const adminPassword = "pw-5d1c8e7f2a9b4e63"

// minifluxSpec builds Miniflux into the artifacts dir and gives its node spec, as the
// miniflux app plugin declares it (without the options it leaves at their defaults).
func minifluxSpec(t testing.TB) json.RawMessage {
	t.Helper()
	bin := filepath.Join(artifactsDir, "miniflux")
	if out, err := exec.Command("go", "build", "-o", bin, "miniflux.app/v2").CombinedOutput(); err != nil {
		t.Fatalf("go build miniflux.app/v2: %v\n%s", err, out)
	}
	spec, err := json.Marshal(contract.InstanceRequest{
		Artifact: contract.Artifact{Binary: "miniflux"},
		Env: map[string]string{
			"LISTEN_ADDR":         "${host}:${port:http}",
			"BASE_URL":            "${url:http}",
			"DATABASE_URL_FILE":   "${file:database-url}",
			"RUN_MIGRATIONS":      "1",
			"CREATE_ADMIN":        "1",
			"ADMIN_USERNAME":      "admin",
			"ADMIN_PASSWORD_FILE": "${file:admin-password}",
			"POLLING_FREQUENCY":   "60",
			"LOG_FORMAT":          "json",
		},
		Files: map[string]contract.InstanceFile{
			"database-url":   {Content: "${secret:db}"},
			"admin-password": {Content: "${secret:admin}"},
		},
		Ports:  []contract.Port{{Name: "http", Protocol: "http"}},
		Health: &contract.Health{Port: "http", HTTPPath: "/healthcheck", TimeoutSeconds: 5, StartSeconds: 120},
	})
	require.NoError(t, err)
	return spec
}

// Miniflux, as the miniflux app plugin declares its node, runs on the test machine
// through the driver against a real PostgreSQL: its sign-in page answers, and
// deprovision stops it.
func TestMinifluxRunsOnTheMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Miniflux")
	}
	dsn := pgtest.DSN(t)
	spec := minifluxSpec(t)
	workDir := t.TempDir()
	rc := start(t, settingsJSON(workDir, ""))
	ctx := context.Background()
	req := resource.Request{Tenant: "t1", Instance: "miniflux", Type: contract.Instance, Spec: spec,
		Secrets: map[string][]byte{"db": []byte(dsn), "admin": []byte(adminPassword)}}
	res, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	addr, err := addressOf(res.Data)
	require.NoError(t, err)
	page, err := get(addr, "/")
	require.NoError(t, err)
	require.Contains(t, page, `name="password"`, "Miniflux's sign-in page")
	log, err := os.ReadFile(filepath.Join(workDir, "t1", "miniflux", "logs", "node.log"))
	require.NoError(t, err)
	require.NotContains(t, string(log), adminPassword)
	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: "miniflux", Type: contract.Instance}))
	_, err = get(addr, "/healthcheck")
	require.Error(t, err, "Miniflux still answers after deprovision")
}
