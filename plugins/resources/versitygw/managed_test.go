package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/resource"
)

// The embedded default: settings {} run a gateway found in bin/artifacts beside the
// plugin directory, with generated root credentials in a 0600 file and a port recorded at
// the first start; it dies with a killed plugin and comes back on the same port with its
// data.
func TestManagedGateway(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	plugin := filepath.Join(root, "bin", "plugins", "fedhost-resource-versitygw")
	artifact := filepath.Join(root, "bin", "artifacts", "versitygw")
	for from, to := range map[string]string{pluginBin: plugin, vgwBin: artifact} {
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		require.NoError(t, os.Link(from, to))
	}
	dataDir := filepath.Join(root, "data")
	require.NoError(t, os.Mkdir(dataDir, 0o700))
	start := func() (*client.Plugin, *resource.Client) {
		p, err := client.Start(ctx, plugin, client.WithEnv(sdk.DataDirEnv+"="+dataDir))
		require.NoError(t, err)
		t.Cleanup(p.Kill)
		require.NoError(t, p.Configure(ctx, json.RawMessage(`{}`)))
		return p, p.Resource()
	}
	spec := json.RawMessage(`{"buckets": {"media": {}}, "keys": {"app": {"grants": {"media": "write"}}}}`)

	p, rc := start()
	dir := filepath.Join(dataDir, managedDirName)
	fi, err := os.Stat(filepath.Join(dir, rootFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "root credentials file mode")
	raw, err := os.ReadFile(filepath.Join(dir, rootFile))
	require.NoError(t, err)
	var creds rootCredentials
	require.NoError(t, json.Unmarshal(raw, &creds))
	portText, err := os.ReadFile(filepath.Join(dir, portFile))
	require.NoError(t, err)
	endpoint := "http://127.0.0.1:" + strings.TrimSpace(string(portText))
	require.FileExists(t, filepath.Join(dir, logFileName))

	res, err := rc.Provision(ctx, resource.Request{Tenant: "managed", Instance: "main", Type: "s3", Spec: spec})
	require.NoError(t, err)
	r := result(t, res.Data)
	require.Equal(t, endpoint, r.Endpoint)
	require.NoError(t, putObject(ctx, keyClient(r, res.Secrets, "app"), r.Buckets["media"], "kept.txt", "kept"))
	owners, err := adminOf(endpoint, aws.Credentials{AccessKeyID: creds.Access, SecretAccessKey: creds.Secret}).listBuckets(ctx)
	require.NoError(t, err, "the generated root credentials do not reach the admin API")
	require.Equal(t, "managed-main", owners["managed-media"])

	// A plugin killed outright takes its gateway with it.
	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGKILL))
	require.Eventually(t, func() bool {
		resp, err := http.Get(endpoint + healthPath)
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	}, 15*time.Second, 100*time.Millisecond, "the gateway outlived its killed plugin")

	_, rc = start()
	again, err := rc.Provision(ctx, resource.Request{Tenant: "managed", Instance: "main", Type: "s3", Spec: spec, Secrets: res.Secrets})
	require.NoError(t, err)
	require.JSONEq(t, string(res.Data), string(again.Data), "the restarted gateway has another endpoint")
	got, err := getObject(ctx, keyClient(r, res.Secrets, "app"), r.Buckets["media"], "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", got)
}
