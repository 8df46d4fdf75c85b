package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/incustest"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// buildFlags are the plugin's go build flags (race_test.go adds -race).
var buildFlags []string

// Built and started once by TestMain: the plugin and the Incus test server.
var (
	pluginBin, testDir string
	srv                *incustest.Server
)

const (
	testImage  = "ghcr.io/fedhost/httpserver:1"
	testToken  = "tok-4f8a2c9e1b7d3a6f"
	nodeUID    = 1000
	testSystem = "images:debian/12"
)

var testSecrets = map[string][]byte{"token": []byte(testToken)}

func TestMain(m *testing.M) {
	plugintest.MainWithServer(m, "incus", func(dir string) (func(), error) {
		testDir = dir
		pluginBin = filepath.Join(dir, "bin", "fedhost-resource-incus")
		if out, err := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", pluginBin, ".")...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
		s, err := incustest.Start(dir,
			incustest.Image{Protocol: "oci", Server: "https://ghcr.io", Alias: "fedhost/httpserver:1", UID: nodeUID, GID: nodeUID},
			incustest.Image{Protocol: "simplestreams", Server: "https://images.linuxcontainers.org", Alias: "debian/12"})
		if err != nil {
			return nil, err
		}
		srv = s
		return s.Close, nil
	})
}

// settingsJSON names the test server, its certificate pinned; edit changes the map.
func settingsJSON(edit func(map[string]any)) json.RawMessage {
	m := map[string]any{
		"url": srv.URL, "client_cert_file": srv.ClientCertFile, "client_key_file": srv.ClientKeyFile,
		"server_cert_file": srv.CertFile, "listen_host": "127.0.0.1", "network": "incusbr0",
		"operation_timeout_seconds": 30,
	}
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	return b
}

func nodeSpec(edit func(*contract.InstanceRequest)) json.RawMessage {
	spec := contract.InstanceRequest{
		Artifact: contract.Artifact{Image: testImage},
		Args:     []string{"/usr/local/bin/httpserver", "--listen", "${host}:${port:http}"},
		Env:      map[string]string{"LISTEN_ADDR": "${host}:${port:http}", "DATA_DIR": "/var/lib/node", "TOKEN_FILE": "${file:token}", "BASE_URL": "${url:http}"},
		Files:    map[string]contract.InstanceFile{"token": {Content: "${secret:token}\n"}},
		Ports:    []contract.Port{{Name: "http", Protocol: "http"}},
		Health:   &contract.Health{Port: "http", HTTPPath: "/healthz", IntervalSeconds: 1, TimeoutSeconds: 2, StartSeconds: 10},
		Volumes:  []contract.Volume{{Name: "data", Path: "/var/lib/node", SizeMB: 64}},
		Limits:   &contract.Limits{MemoryMB: 256, CPUMillis: 500},
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

func TestConformance(t *testing.T) {
	conformance.Resource(t, pluginBin, conformance.ResourceCase{
		// The test server runs the commands on this machine (internal/incustest, exec.go).
		Exec:         &conformance.ExecCase{Shell: "sh", EnvName: "DATA_DIR", EnvValue: "/var/lib/node"},
		Type:         contract.Instance,
		Settings:     settingsJSON(nil),
		Request:      nodeSpec(nil),
		Secrets:      testSecrets,
		Invalid:      nodeSpec(func(s *contract.InstanceRequest) { s.Artifact = contract.Artifact{Binary: "miniflux"} }),
		InvalidField: "request/artifact/binary",
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
			ok, _, _ := srv.Instance(instanceName(p.Tenant, p.Instance))
			return ok, nil
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
			b, ok := srv.VolumeFile("default", volumeName(instanceName(p.Tenant, p.Instance), "data"), "data")
			return ok && string(b) == "seeded "+p.Tenant, nil
		},
	})
}

func countRequests(method, path string) int {
	n := 0
	for _, r := range srv.Requests() {
		if r == method+" "+path {
			n++
		}
	}
	return n
}

// A node becomes an instance with its files 0600 owned by the image's user, its secret
// only in the file, limits and proxy devices in its config; a provision of the same
// spec leaves it alone, a changed spec makes it anew with the same ports, and
// deprovision removes it and its volume.
func TestNodeLifecycle(t *testing.T) {
	rc := start(t, settingsJSON(nil))
	ctx := context.Background()
	req := resource.Request{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	res, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	addr, err := addressOf(res.Data)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
	_, err = get(addr, "/healthz")
	require.NoError(t, err)

	name := instanceName("t1", "web")
	exists, running, config := srv.Instance(name)
	require.True(t, exists && running)
	content, mode, uid, gid, ok := srv.File(name, "/srv/fedhost/token")
	require.True(t, ok, "the token file is not in the instance")
	require.Equal(t, testToken+"\n", string(content))
	require.Equal(t, 0o600, mode)
	require.Equal(t, [2]int{nodeUID, nodeUID}, [2]int{uid, gid}, "the file is not the image user's")
	script, mode, _, _, ok := srv.File(name, "/srv/fedhost/.fedhost/run.sh")
	require.True(t, ok)
	require.Equal(t, 0o700, mode)
	require.Contains(t, string(script), `exec '/usr/local/bin/httpserver' '--listen' '127.0.0.1:`)
	for k, v := range config {
		require.NotContains(t, v, testToken, "config key %s holds the secret", k)
	}
	require.Equal(t, "/srv/fedhost/token", config["environment.TOKEN_FILE"])
	require.Equal(t, "http://"+addr+"/", config["environment.BASE_URL"])
	require.Equal(t, "256MiB", config["limits.memory"])
	require.Equal(t, "50ms/100ms", config["limits.cpu.allowance"])
	require.Equal(t, "/bin/sh /srv/fedhost/.fedhost/run.sh", config["oci.entrypoint"])
	require.Equal(t, "t1/web", config[keyNode])
	require.True(t, srv.Volume("default", volumeName(name, "data")))

	creates := countRequests("POST", "/1.0/instances")
	res2, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	require.JSONEq(t, string(res.Data), string(res2.Data))
	require.Equal(t, creates, countRequests("POST", "/1.0/instances"), "a provision of the same spec made the instance again")
	boot, err := get(addr, "/boot")
	require.NoError(t, err)
	require.Equal(t, "1", boot)

	_, err = data(http.MethodPut, addr, "kept across a change")
	require.NoError(t, err)
	req.Spec = nodeSpec(func(s *contract.InstanceRequest) { s.Env["EXTRA"] = "1" })
	res3, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	require.JSONEq(t, string(res.Data), string(res3.Data), "a changed spec keeps the node's ports")
	require.Equal(t, creates+1, countRequests("POST", "/1.0/instances"), "a changed spec did not make the instance again")
	_, _, config = srv.Instance(name)
	require.Equal(t, "1", config["environment.EXTRA"])
	got, err := data(http.MethodGet, addr, "")
	require.NoError(t, err)
	require.Equal(t, "kept across a change", got, "the volume's data did not survive the new instance")

	st, err := rc.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "ready", st.State)

	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: req.Spec}))
	exists, _, _ = srv.Instance(name)
	require.False(t, exists)
	require.False(t, srv.Volume("default", volumeName(name, "data")))
	_, err = get(addr, "/healthz")
	require.Error(t, err, "the proxy device still answers after deprovision")
	st, err = rc.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)
}

// A system container runs the node's args as a systemd service the driver writes.
func TestSystemContainer(t *testing.T) {
	rc := start(t, settingsJSON(nil))
	ctx := context.Background()
	spec := nodeSpec(func(s *contract.InstanceRequest) { s.Artifact.Image = testSystem })
	req := resource.Request{Tenant: "t1", Instance: "sys", Type: contract.Instance, Spec: spec, Secrets: testSecrets}
	_, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: "sys", Type: contract.Instance, Spec: spec})
	})
	name := instanceName("t1", "sys")
	unit, _, _, _, ok := srv.File(name, "/etc/systemd/system/fedhost-node.service")
	require.True(t, ok)
	require.Contains(t, string(unit), "ExecStart=/bin/sh /srv/fedhost/.fedhost/run.sh")
	link, _, _, _, ok := srv.File(name, "/etc/systemd/system/multi-user.target.wants/fedhost-node.service")
	require.True(t, ok)
	require.Equal(t, "../fedhost-node.service", string(link))
	script, _, uid, _, _ := srv.File(name, "/srv/fedhost/.fedhost/run.sh")
	require.Equal(t, 0, uid)
	require.Contains(t, string(script), "export TOKEN_FILE='/srv/fedhost/token'\n")
	_, _, config := srv.Instance(name)
	require.Empty(t, config["oci.entrypoint"])

	_, err = rc.Provision(ctx, resource.Request{Tenant: "t1", Instance: "sys2", Type: contract.Instance, Secrets: testSecrets,
		Spec: nodeSpec(func(s *contract.InstanceRequest) { s.Artifact.Image = testSystem; s.Args = nil })})
	require.ErrorContains(t, err, "request/args")
}

// A server certificate other than the pinned one is refused with both fingerprints.
func TestChangedServerCertificateRefused(t *testing.T) {
	dir := t.TempDir()
	other, _, otherFP, err := incustest.WriteCert(dir, "other")
	require.NoError(t, err)
	rc := start(t, settingsJSON(func(m map[string]any) { m["server_cert_file"] = other }))
	_, err = rc.Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "pin", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets})
	require.Error(t, err)
	require.Contains(t, err.Error(), srv.Fingerprint)
	require.Contains(t, err.Error(), otherFP)
	require.Contains(t, err.Error(), "server_cert_file")
	exists, _, _ := srv.Instance(instanceName("t1", "pin"))
	require.False(t, exists)
}

// A client certificate the server does not trust is refused, naming the setting.
func TestUntrustedClientCertificate(t *testing.T) {
	cert, key, _, err := incustest.WriteCert(t.TempDir(), "stranger")
	require.NoError(t, err)
	rc := start(t, settingsJSON(func(m map[string]any) { m["client_cert_file"], m["client_key_file"] = cert, key }))
	_, err = rc.Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "who", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets})
	require.ErrorContains(t, err, "does not trust client_cert_file")
	require.ErrorContains(t, err, strings.TrimPrefix(srv.URL, "https://"))
}

// An image the server cannot find fails the create operation; the error names the
// field, the image and the server.
func TestUnknownImage(t *testing.T) {
	rc := start(t, settingsJSON(nil))
	spec := nodeSpec(func(s *contract.InstanceRequest) { s.Artifact.Image = "ghcr.io/fedhost/nosuch:9" })
	_, err := rc.Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "noimg", Type: contract.Instance, Spec: spec, Secrets: testSecrets})
	require.Equal(t, "request/artifact/image", sdk.FieldOf(err), err)
	for _, want := range []string{"ghcr.io/fedhost/nosuch:9", strings.TrimPrefix(srv.URL, "https://"), "Image not found"} {
		require.Contains(t, err.Error(), want)
	}
	exists, _, _ := srv.Instance(instanceName("t1", "noimg"))
	require.False(t, exists)
	require.NoError(t, rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "t1", Instance: "noimg", Type: contract.Instance, Spec: spec}))
}

// A start operation that fails is reported with the server's message and the server;
// the next provision makes the node.
func TestFailedOperation(t *testing.T) {
	rc := start(t, settingsJSON(nil))
	ctx := context.Background()
	req := resource.Request{Tenant: "t1", Instance: "opfail", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	t.Cleanup(func() {
		_ = rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: "opfail", Type: contract.Instance, Spec: req.Spec})
	})
	srv.FailNext("Starting instance", "Failed to run: forkstart: exit status 1")
	_, err := rc.Provision(ctx, req)
	require.Error(t, err)
	require.Contains(t, err.Error(), "starting instance "+instanceName("t1", "opfail"))
	require.Contains(t, err.Error(), "Failed to run: forkstart: exit status 1")
	require.Contains(t, err.Error(), strings.TrimPrefix(srv.URL, "https://"))
	_, err = rc.Provision(ctx, req)
	require.NoError(t, err)
}

// A node that fails its health check: the error shows its console log with the token
// taken out.
func TestFailingNodeShowsItsLogWithoutTheSecret(t *testing.T) {
	rc := start(t, settingsJSON(nil))
	spec := nodeSpec(func(s *contract.InstanceRequest) {
		s.Env["FAIL_START"] = "1"
		s.Health.StartSeconds = 1
	})
	req := resource.Request{Tenant: "t1", Instance: "bad", Type: contract.Instance, Spec: spec, Secrets: testSecrets}
	t.Cleanup(func() {
		_ = rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "t1", Instance: "bad", Type: contract.Instance, Spec: spec})
	})
	_, err := rc.Provision(context.Background(), req)
	require.Error(t, err)
	require.Contains(t, err.Error(), "refusing to start with token [secret token]")
	require.NotContains(t, err.Error(), testToken)
}

// The node specs of the apps declared for this driver pass its validation.
func TestAppNodeSpecsPassValidate(t *testing.T) {
	rc := start(t, settingsJSON(nil))
	apps := map[string]map[string]any{
		"mastodon": {"oidc_login": true, "oidc_only": true},
		"peertube": {"oidc_login": true},
		"pixelfed": {"oidc_login": true},
	}
	for name, oidc := range apps {
		t.Run(name, func(t *testing.T) {
			bin := filepath.Join(testDir, "bin", "fedhost-app-"+name)
			if _, err := os.Stat(bin); err != nil {
				out, err := exec.Command("go", "build", "-o", bin, "../../apps/"+name).CombinedOutput()
				require.NoError(t, err, string(out))
			}
			oidcConfig, _ := json.Marshal(oidc)
			cases := conformance.RenderNodes(t, bin, conformance.AppCase{Name: "defaults"}, conformance.AppCase{Name: "oidc", Config: oidcConfig})
			n := 0
			for cname, nodes := range cases {
				require.NotEmpty(t, nodes, "case %s rendered no node", cname)
				for _, node := range nodes {
					n++
					require.NoError(t, rc.Validate(context.Background(), contract.Instance, node.Spec), "%s %s node %s", name, cname, node.Name)
				}
			}
			require.Positive(t, n)
		})
	}
}

// A server without the OCI API extensions is refused for an OCI image before anything
// is made, naming the field and the extension; a separate server, since the driver
// reads GET /1.0 once per configuration.
func TestServerWithoutOCI(t *testing.T) {
	old, err := incustest.Start(t.TempDir(), incustest.Image{Protocol: "oci", Server: "https://ghcr.io", Alias: "fedhost/httpserver:1"})
	require.NoError(t, err)
	t.Cleanup(old.Close)
	old.SetExtensions("instances")
	rc := start(t, settingsJSON(func(m map[string]any) {
		m["url"], m["server_cert_file"], m["client_cert_file"], m["client_key_file"] = old.URL, old.CertFile, old.ClientCertFile, old.ClientKeyFile
	}))
	_, err = rc.Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "old", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets})
	require.ErrorContains(t, err, "request/artifact/image")
	require.ErrorContains(t, err, "instance_oci")
	exists, _, _ := old.Instance(instanceName("t1", "old"))
	require.False(t, exists)
}

// With ca_file the server's certificate is checked against that CA and the url's host;
// another CA is refused naming the server.
func TestCAFile(t *testing.T) {
	ctx := context.Background()
	rc := start(t, settingsJSON(func(m map[string]any) { delete(m, "server_cert_file"); m["ca_file"] = srv.CertFile }))
	req := resource.Request{Tenant: "t1", Instance: "ca", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	_, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: "ca", Type: contract.Instance, Spec: req.Spec}))

	other, _, _, err := incustest.WriteCert(t.TempDir(), "other-ca")
	require.NoError(t, err)
	rc = start(t, settingsJSON(func(m map[string]any) { delete(m, "server_cert_file"); m["ca_file"] = other }))
	_, err = rc.Provision(ctx, req)
	require.ErrorContains(t, err, strings.TrimPrefix(srv.URL, "https://"))
	require.ErrorContains(t, err, "certificate signed by unknown authority")
}

// A port some other program holds on the Incus machine fails the start of the proxy
// device; the driver takes another port of port_range and the node runs. With no other
// port left the error names the port range.
func TestTakenPortIsReplaced(t *testing.T) {
	l, busy := busyPortBeforeAFreeOne(t)
	t.Cleanup(func() { l.Close() })
	// The range is the busy port and the next one; without the retry, half of the
	// provisions would take the busy one and fail.
	rangeOf := func(hi int) json.RawMessage {
		return settingsJSON(func(m map[string]any) { m["port_range"] = fmt.Sprintf("%d-%d", busy, hi) })
	}
	rc := start(t, rangeOf(busy+1))
	ctx := context.Background()
	for i := range 6 {
		req := resource.Request{Tenant: "t1", Instance: fmt.Sprintf("busy%d", i), Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
		res, err := rc.Provision(ctx, req)
		require.NoError(t, err)
		addr, err := addressOf(res.Data)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("127.0.0.1:%d", busy+1), addr)
		require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: req.Instance, Type: contract.Instance, Spec: req.Spec}))
	}
	rc = start(t, rangeOf(busy))
	_, err := rc.Provision(ctx, resource.Request{Tenant: "t1", Instance: "busy", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets})
	require.ErrorContains(t, err, "port_range")
	require.Equal(t, sdk.CodeLimitExceeded, sdk.CodeOf(err))
	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "t1", Instance: "busy", Type: contract.Instance, Spec: nodeSpec(nil)}))
}

// busyPortBeforeAFreeOne holds a port whose next port is free, both below the kernel's
// ephemeral range (32768-60999 by default): a port from :0 is in that range and its next
// one can be any process's outgoing connection by the time the driver binds it (CI saw it).
func busyPortBeforeAFreeOne(t *testing.T) (net.Listener, int) {
	t.Helper()
	for port := 20000 + rand.IntN(10000); port < 32000; port += 2 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		next, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1))
		if err != nil {
			l.Close()
			continue
		}
		next.Close()
		return l, port
	}
	t.Fatal("no two free ports in a row below 32000")
	return nil, 0
}
