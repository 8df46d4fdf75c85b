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

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// pluginBin and artifactsDir are built once by TestMain: the plugin, and the test node
// (testdata/httpserver) as the artifact "httpserver".
var pluginBin, artifactsDir string

const testToken = "tok-4f1b7c2e9d8a6b5c"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fedhost-local-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginBin = filepath.Join(dir, "bin", "fedhost-resource-local")
	artifactsDir = filepath.Join(dir, "artifacts")
	for _, b := range [][2]string{{pluginBin, "."}, {filepath.Join(artifactsDir, "httpserver"), "./testdata/httpserver"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b[1], err, out)
			os.Exit(1)
		}
	}
	// A shell as an artifact, for the commands the exec tests run in a node.
	if err := copyExecutable("/bin/sh", filepath.Join(artifactsDir, "sh")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	killNodes(filepath.Join(artifactsDir, "httpserver"))
	os.RemoveAll(dir)
	os.Exit(code)
}

func copyExecutable(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// killNodes ends the test nodes that outlived their plugin (by design nodes survive it):
// the processes whose executable is the test artifact.
func killNodes(exe string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && target == exe {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// nodeSpec is the test node's spec; edit changes it before it is encoded.
func nodeSpec(edit func(*contract.InstanceRequest)) json.RawMessage {
	spec := contract.InstanceRequest{
		Artifact: contract.Artifact{Binary: "httpserver"},
		Env: map[string]string{
			"LISTEN_ADDR": "${host}:${port:http}",
			"DATA_DIR":    "data",
			"TOKEN_FILE":  "${file:token}",
		},
		Files:   map[string]contract.InstanceFile{"token": {Content: "${secret:token}\n"}},
		Ports:   []contract.Port{{Name: "http", Protocol: "http"}},
		Health:  &contract.Health{Port: "http", HTTPPath: "/healthz", IntervalSeconds: 1, StartSeconds: 20},
		Volumes: []contract.Volume{{Name: "data", Path: "data"}},
	}
	if edit != nil {
		edit(&spec)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	return b
}

var testSecrets = map[string][]byte{"token": []byte(testToken)}

func settingsJSON(extra string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"artifacts_dir": %q%s}`, artifactsDir, extra))
}

// bundle is one running plugin on a data dir.
type bundle struct {
	plugin  *client.Plugin
	rc      *resource.Client
	dataDir string
}

func setup(t testing.TB, dataDir string, extraSettings string) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	p, err := client.Start(ctx, pluginBin, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+dataDir))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, settingsJSON(extraSettings)))
	return &bundle{plugin: p, rc: p.Resource(), dataDir: dataDir}
}

func (b *bundle) provision(t *testing.T, tenant string, spec json.RawMessage) contract.InstanceResult {
	t.Helper()
	res, err := b.rc.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: "web", Type: contract.Instance, Spec: spec, Secrets: testSecrets})
	require.NoError(t, err)
	var out contract.InstanceResult
	require.NoError(t, json.Unmarshal(res.Data, &out))
	t.Cleanup(func() {
		_ = b.rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: "web", Type: contract.Instance})
	})
	return out
}

func (b *bundle) workdir(tenant string) string {
	return filepath.Join(b.dataDir, "nodes", tenant, "web")
}

func get(addr, path string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + path)
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

func pidOf(t *testing.T, addr string) int {
	t.Helper()
	s, err := get(addr, "/pid")
	require.NoError(t, err)
	pid, err := strconv.Atoi(s)
	require.NoError(t, err)
	return pid
}

// eventually waits up to d for cond.
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

func addressOf(p conformance.Provisioned) (string, error) {
	var r contract.InstanceResult
	if err := json.Unmarshal(p.Result, &r); err != nil {
		return "", err
	}
	if r.Addresses["http"] == "" {
		return "", errors.New("the result has no http address")
	}
	return r.Addresses["http"], nil
}

func TestConformance(t *testing.T) {
	// The working dir of each provisioned node, as the node reports it, so that Exists
	// and DataKept can look at it once the node is stopped.
	workdirs := map[string]string{}
	remember := func(p conformance.Provisioned) error {
		addr, err := addressOf(p)
		if err != nil {
			return err
		}
		wd, err := get(addr, "/wd")
		if err != nil {
			return err
		}
		workdirs[p.Tenant] = wd
		return nil
	}
	conformance.Resource(t, pluginBin, conformance.ResourceCase{
		Type:         contract.Instance,
		Settings:     settingsJSON(""),
		Request:      nodeSpec(nil),
		Secrets:      testSecrets,
		Invalid:      nodeSpec(func(s *contract.InstanceRequest) { s.Artifact = contract.Artifact{Image: "docker.io/library/nginx:1"} }),
		InvalidField: "request/artifact/image",
		Exec:         &conformance.ExecCase{Shell: "sh", EnvName: "DATA_DIR", EnvValue: "data"},
		// An instance has no credentials: from reaches to when what is written through
		// from's node is read back through to's node.
		Access: func(_ context.Context, from, to conformance.Provisioned) error {
			fromAddr, err := addressOf(from)
			if err != nil {
				return err
			}
			toAddr, err := addressOf(to)
			if err != nil {
				return err
			}
			want := fmt.Sprintf("written via %s/%s at %d", from.Tenant, from.Instance, time.Now().UnixNano())
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
			addr, err := addressOf(p)
			if err != nil {
				return false, err
			}
			if _, err := get(addr, "/healthz"); err == nil {
				return true, remember(p)
			}
			wd, ok := workdirs[p.Tenant]
			if !ok {
				return false, nil
			}
			_, err = os.Stat(wd)
			return err == nil, nil
		},
		Seed: func(_ context.Context, p conformance.Provisioned) error {
			if err := remember(p); err != nil {
				return err
			}
			addr, _ := addressOf(p)
			_, err := data(http.MethodPut, addr, "seeded "+p.Tenant)
			return err
		},
		DataKept: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			b, err := os.ReadFile(filepath.Join(workdirs[p.Tenant], "data", "data"))
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return err == nil && string(b) == "seeded "+p.Tenant, err
		},
	})
}
