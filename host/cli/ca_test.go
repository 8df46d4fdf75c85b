package cli_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// fedhost ca root prints the root the localca provider made in its data dir, a CA that
// the certificates it issues verify against; before the provider ever ran it says to
// start it first (issue 11, item 3).
func TestCARootPrintsTheLocalCA(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	env := append(os.Environ(), "FEDHOST_DATA_DIR="+data, "FEDHOST_PLUGIN_DIR="+t.TempDir())

	out, stderr, code := run(t, env, "ca", "root")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, stderr, "start fedhost with the localca provider first")

	// The plugin run as the host runs it: its data dir is <data_dir>/plugins/<name>.
	bin := filepath.Join(t.TempDir(), "fedhost-resource-localca")
	b, err := exec.Command("go", "build", "-o", bin, "../../plugins/resources/localca").CombinedOutput()
	require.NoError(t, err, "%s", b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.Start(ctx, bin, client.WithEnv(sdk.DataDirEnv+"="+filepath.Join(data, "plugins", "localca")))
	require.NoError(t, err)
	defer p.Kill()
	require.NoError(t, p.Configure(ctx, json.RawMessage(`{}`)))
	res, err := p.Resource().Provision(ctx, resource.Request{Tenant: "acme", Instance: "web", Type: contract.TLS, Spec: json.RawMessage(`{"domains":["feeds.acme.localhost"]}`)})
	require.NoError(t, err)

	out, stderr, code = run(t, env, "ca", "root")
	require.Equal(t, 0, code, stderr)
	block, rest := pem.Decode([]byte(out))
	require.NotNil(t, block)
	require.Equal(t, "CERTIFICATE", block.Type)
	require.Empty(t, rest, "one certificate, nothing else")
	root, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, root.IsCA)
	require.Contains(t, root.Subject.CommonName, "fedhost local CA ")

	var r contract.TLSResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	leafBlock, _ := pem.Decode([]byte(r.Certificate))
	require.NotNil(t, leafBlock)
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(root)
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "feeds.acme.localhost", Roots: roots})
	require.NoError(t, err, "the printed root is the CA that issues the certificates")
}
