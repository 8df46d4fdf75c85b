package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

func TestImageAndUnknownBinaryRefusedBeforeAnythingIsMade(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		spec  func(*contract.InstanceRequest)
		field string
	}{
		{"oci image", func(s *contract.InstanceRequest) {
			s.Artifact = contract.Artifact{Image: "ghcr.io/mastodon/mastodon:v4"}
		}, "request/artifact/image"},
		{"binary not in artifacts_dir", func(s *contract.InstanceRequest) { s.Artifact.Binary = "mastodon" }, "request/artifact/binary"},
	} {
		spec := nodeSpec(tc.spec)
		err := b.rc.Validate(ctx, contract.Instance, spec)
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "validate %s: %v", tc.name, err)
		require.Equal(t, tc.field, sdk.FieldOf(err), tc.name)
		_, err = b.rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance, Spec: spec, Secrets: testSecrets})
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "provision %s: %v", tc.name, err)
		require.Equal(t, tc.field, sdk.FieldOf(err), tc.name)
		if tc.field == "request/artifact/image" {
			require.Contains(t, err.Error(), "the local instance provider runs binaries, not OCI images")
		}
	}
	_, err := os.Stat(filepath.Join(b.dataDir, "nodes"))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused request made the nodes dir")
}

func TestProvisionReconciles(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	res := b.provision(t, "acme", nodeSpec(nil))
	require.Equal(t, "running", res.State)
	addr := res.Addresses["http"]
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
	pid := pidOf(t, addr)

	wd := b.workdir("acme")
	for path, mode := range map[string]os.FileMode{wd: 0o700 | os.ModeDir, filepath.Join(wd, "token"): 0o600, filepath.Join(wd, stateFile): 0o600, filepath.Join(wd, "data"): 0o700 | os.ModeDir} {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode(), path)
	}
	token, err := os.ReadFile(filepath.Join(wd, "token"))
	require.NoError(t, err)
	require.Equal(t, testToken+"\n", string(token), "the secret placeholder is filled")

	env, err := get(addr, "/env")
	require.NoError(t, err)
	require.Equal(t, []string{"DATA_DIR", "HOME", "LISTEN_ADDR", "PATH", "TMPDIR", "TOKEN_FILE"}, strings.Split(env, "\n"), "the node's environment is the spec's env and PATH, HOME, TMPDIR only")

	again := b.provision(t, "acme", nodeSpec(nil))
	require.Equal(t, res, again)
	require.Equal(t, pid, pidOf(t, addr), "an unchanged spec restarted the node")

	changed := b.provision(t, "acme", nodeSpec(func(s *contract.InstanceRequest) { s.Env["MODE"] = "two" }))
	require.Equal(t, addr, changed.Addresses["http"], "the node lost its port")
	require.NotEqual(t, pid, pidOf(t, addr), "a changed spec did not restart the node")
	pid = pidOf(t, addr)

	secrets := map[string][]byte{"token": []byte("another-token-value")}
	_, err = b.rc.Provision(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance, Spec: nodeSpec(func(s *contract.InstanceRequest) { s.Env["MODE"] = "two" }), Secrets: secrets})
	require.NoError(t, err)
	require.NotEqual(t, pid, pidOf(t, addr), "a changed file content did not restart the node")

	st, err := b.rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance})
	require.NoError(t, err)
	require.Equal(t, "ready", st.State, st.Message)
}

func TestMissingSecretNamesTheFile(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	_, err := b.rc.Provision(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance, Spec: nodeSpec(nil)})
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "request/files/token", sdk.FieldOf(err))
}

func TestCrashedNodeIsRestartedOnItsPort(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	addr := b.provision(t, "acme", nodeSpec(nil)).Addresses["http"]
	pid := pidOf(t, addr)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	var next int
	eventually(t, 10*time.Second, "the killed node came back", func() bool {
		s, err := get(addr, "/pid")
		if err == nil {
			fmt.Sscan(s, &next)
		}
		return err == nil && next != pid
	})
	// The second crash in a row waits 2 s (backoff doubles), the first 1 s.
	require.NoError(t, syscall.Kill(next, syscall.SIGKILL))
	killed := time.Now()
	eventually(t, 10*time.Second, "the node came back after a second crash", func() bool {
		s, err := get(addr, "/pid")
		var p int
		if err == nil {
			fmt.Sscan(s, &p)
		}
		return err == nil && p != next
	})
	require.GreaterOrEqual(t, time.Since(killed), 2*time.Second, "the second restart did not back off")
	var st resource.Status
	eventually(t, 5*time.Second, "the restarted node is ready", func() bool {
		var err error
		st, err = b.rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance})
		require.NoError(t, err)
		return st.State == "ready"
	})
	require.Contains(t, st.Message, "restarted 2 times")
}

func TestNodeOutlivesThePluginAndIsAdopted(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	first := setup(t, dataDir, "")
	addr := first.provision(t, "acme", nodeSpec(nil)).Addresses["http"]
	pid := pidOf(t, addr)

	require.NoError(t, syscall.Kill(first.plugin.Pid(), syscall.SIGKILL))
	eventually(t, 5*time.Second, "the plugin died", first.plugin.Exited)
	require.Equal(t, pid, pidOf(t, addr), "the node died with the plugin")

	second := setup(t, dataDir, "")
	ctx := context.Background()
	req := resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance}
	var st resource.Status
	eventually(t, 5*time.Second, "the adopted node is ready", func() bool {
		var err error
		st, err = second.rc.Status(ctx, req)
		require.NoError(t, err)
		return st.State == "ready"
	})
	require.Contains(t, st.Message, fmt.Sprintf("pid %d ", pid))
	res := second.provision(t, "acme", nodeSpec(nil))
	require.Equal(t, addr, res.Addresses["http"])
	require.Equal(t, pid, pidOf(t, addr), "provision restarted an adopted node with an unchanged spec")

	// An adopted node is no child of the new plugin: its death is found by polling.
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, 10*time.Second, "the adopted node was restarted after it died", func() bool {
		s, err := get(addr, "/pid")
		return err == nil && s != fmt.Sprint(pid)
	})

	require.NoError(t, second.rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Instance}))
	_, err := get(addr, "/healthz")
	require.Error(t, err, "the node answers after deprovision")
	_, err = os.Stat(second.workdir("acme"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A graceful stop of the plugin, as a clean stop of the host does, ends its nodes within
// the 2 s go-plugin gives it, and keeps their state: the next run restarts them on their
// ports without a new provision.
func TestCleanStopEndsNodesAndTheNextRunRestartsThem(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	first := setup(t, dataDir, "")
	addr := first.provision(t, "acme", nodeSpec(nil)).Addresses["http"]
	pid := pidOf(t, addr)

	stopped := time.Now()
	first.plugin.Kill()
	require.True(t, first.plugin.Exited())
	require.Less(t, time.Since(stopped), 2*time.Second, "the plugin was killed, not stopped, by its host")
	require.Error(t, syscall.Kill(pid, 0), "the node outlived a clean stop of the plugin")
	_, err := get(addr, "/healthz")
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(first.workdir("acme"), "state.json"))
	require.NoError(t, err, "the node's state is kept for the next run")

	second := setup(t, dataDir, "")
	eventually(t, 10*time.Second, "the next run restarted the node on its port", func() bool {
		s, err := get(addr, "/pid")
		return err == nil && s != fmt.Sprint(pid)
	})
	st, err := second.rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance})
	require.NoError(t, err)
	require.Contains(t, []string{"ready", "pending"}, st.State)
}

func TestUnhealthyStartFailsWithoutSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	spec := nodeSpec(func(s *contract.InstanceRequest) {
		s.Env["FAIL_START"] = "1"
		s.Health.StartSeconds = 2
	})
	start := time.Now()
	_, err := b.rc.Provision(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance, Spec: spec, Secrets: testSecrets})
	t.Cleanup(func() {
		_ = b.rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Instance})
	})
	require.Error(t, err)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, sdk.CodeInternal, sdk.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "did not become healthy")
	require.Contains(t, err.Error(), "refusing to start with token [secret token]", "the error gives the end of stderr")
	require.NotContains(t, err.Error(), testToken)

	st, err := b.rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance})
	require.NoError(t, err)
	require.Equal(t, "degraded", st.State)
}

func TestCrashLoopFailsWithoutWaitingOutTheStartTime(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	spec := nodeSpec(func(s *contract.InstanceRequest) {
		s.Env["FAIL_START"] = "1"
		s.Health.StartSeconds = 600
	})
	start := time.Now()
	_, err := b.rc.Provision(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance, Spec: spec, Secrets: testSecrets})
	t.Cleanup(func() {
		_ = b.rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Instance})
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "ended 3 times while starting")
	require.Contains(t, err.Error(), "exited with status")
	// Three ends with the 1 s, 2 s backoff between them: seconds, not the 10 minutes.
	require.Less(t, time.Since(start), 2*time.Minute)
}

func TestLogsRotate(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), `, "log_max_bytes": 4096, "log_keep": 2`)
	addr := b.provision(t, "acme", nodeSpec(nil)).Addresses["http"]
	logs := filepath.Join(b.workdir("acme"), "logs")
	for i := 1; i <= 3; i++ {
		_, err := get(addr, "/log?bytes=5000")
		require.NoError(t, err)
		eventually(t, 5*time.Second, fmt.Sprintf("rotation %d", i), func() bool {
			fi, err := os.Stat(filepath.Join(logs, "stdout.log"))
			return err == nil && fi.Size() < 4096
		})
	}
	for _, name := range []string{"stdout.log.1", "stdout.log.2"} {
		fi, err := os.Stat(filepath.Join(logs, name))
		require.NoError(t, err, name)
		require.GreaterOrEqual(t, fi.Size(), int64(5000), name)
		require.Equal(t, os.FileMode(0o600), fi.Mode(), name)
	}
	_, err := os.Stat(filepath.Join(logs, "stdout.log.3"))
	require.ErrorIs(t, err, os.ErrNotExist, "more rotated files than log_keep")
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	addr := b.provision(t, "acme", nodeSpec(func(s *contract.InstanceRequest) {
		s.Limits = &contract.Limits{MemoryMB: 256, CPUMillis: 500}
	})).Addresses["http"]
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pidOf(t, addr)))
	require.NoError(t, err)
	require.Regexp(t, `Max data size\s+268435456\s+268435456\s+bytes`, string(limits))
}

func TestRetainedDeprovisionKeepsOnlyVolumes(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	addr := b.provision(t, "acme", nodeSpec(nil)).Addresses["http"]
	_, err := data("PUT", addr, "kept")
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, b.rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Instance, Retain: true}))
	entries, err := os.ReadDir(b.workdir("acme"))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "data", entries[0].Name())
	st, err := b.rc.Status(ctx, resource.Request{Tenant: "acme", Instance: "web", Type: contract.Instance})
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)
	require.Contains(t, string(st.Data), `"stopped"`)

	addr = b.provision(t, "acme", nodeSpec(nil)).Addresses["http"]
	got, err := data("GET", addr, "")
	require.NoError(t, err)
	require.Equal(t, "kept", got, "a resumed node lost its volume")
}
