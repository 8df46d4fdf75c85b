package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// binary is the plugin built once for the whole package.
var binary string

func TestMain(m *testing.M) { plugintest.Main(m, "fedhost-resource-localca", &binary) }

const request = `{"domains":["feeds.acme.localhost","www.acme.localhost"]}`

// decoded is a tls result with its chain parsed.
type decoded struct {
	contract.TLSResult
	leaf, root *x509.Certificate
}

func decode(t testing.TB, raw json.RawMessage) decoded {
	t.Helper()
	var d decoded
	require.NoError(t, json.Unmarshal(raw, &d.TLSResult))
	rest := []byte(d.Certificate)
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		require.Equal(t, "CERTIFICATE", b.Type, "the chain holds certificates only")
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		certs = append(certs, c)
	}
	require.Len(t, certs, 2, "the chain is the leaf and the root")
	d.leaf, d.root = certs[0], certs[1]
	b, _ := pem.Decode([]byte(d.CA))
	require.NotNil(t, b, "the result names the root as its CA, which no client trusts by itself")
	require.Equal(t, d.root.Raw, b.Bytes, "the result's CA is the chain's root")
	return d
}

// keyMatches reports whether the key of from is the key of to's certificate.
func keyMatches(from, to conformance.Provisioned) error {
	var r contract.TLSResult
	if err := json.Unmarshal(to.Result, &r); err != nil {
		return err
	}
	leaf, err := parseCertificate([]byte(r.Certificate))
	if err != nil {
		return err
	}
	key, err := parseKey(from.Secrets[keySecret])
	if err != nil {
		return err
	}
	if !key.PublicKey.Equal(leaf.PublicKey) {
		return errors.New("the key is not the certificate's")
	}
	return nil
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	raw, err := json.Marshal(settings{Dir: dir})
	require.NoError(t, err)
	conformance.Resource(t, binary, conformance.ResourceCase{
		Type:         contract.TLS,
		Settings:     raw,
		Request:      json.RawMessage(request),
		Invalid:      json.RawMessage(`{"domains":["feeds.acme.localhost","10.0.0.1"]}`),
		InvalidField: "request/domains/1",
		Access: func(_ context.Context, from, to conformance.Provisioned) error {
			return keyMatches(from, to)
		},
		Exists: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			_, err := os.Stat(filepath.Join(dir, issuedDir, p.Tenant, p.Instance+".pem"))
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return err == nil, err
		},
	})
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

// start runs the plugin on its own data dir, its logs in the returned buffer.
func start(t *testing.T, dataDir string) (*resource.Client, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	p, err := client.Start(ctx, binary, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+dataDir))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, json.RawMessage(`{}`)))
	return p.Resource(), logs
}

func provisionReq(instance, spec string, secrets map[string][]byte) resource.Request {
	return resource.Request{Tenant: "acme", Instance: instance, Type: contract.TLS, Spec: json.RawMessage(spec), Secrets: secrets}
}

// The chain a provision gives verifies against the root in the data dir for each name
// asked for, as a TLS server certificate, and for no other name.
func TestChainVerifiesForTheNamesAskedFor(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	rc, _ := start(t, dataDir)
	res, err := rc.Provision(context.Background(), provisionReq("web", request, nil))
	require.NoError(t, err)
	d := decode(t, res.Data)

	rootPEM, err := os.ReadFile(filepath.Join(dataDir, rootFileName))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(rootPEM))
	require.True(t, d.root.Equal(mustParse(t, rootPEM)), "the chain ends in the root of the data dir")
	require.True(t, d.root.IsCA)
	require.Equal(t, 0, d.root.MaxPathLen)
	require.True(t, d.root.MaxPathLenZero)
	require.Equal(t, x509.KeyUsageCertSign, d.root.KeyUsage&x509.KeyUsageCertSign)
	host, err := os.Hostname()
	require.NoError(t, err)
	require.Equal(t, "fedhost local CA "+host, d.root.Subject.CommonName)
	require.WithinDuration(t, time.Now().Add(rootLifetime), d.root.NotAfter, 2*time.Hour)

	for _, name := range []string{"feeds.acme.localhost", "www.acme.localhost"} {
		_, err := d.leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		require.NoError(t, err, name)
	}
	for _, name := range []string{"other.acme.localhost", "acme.localhost", "feeds.beta.localhost"} {
		_, err := d.leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		require.Error(t, err, name)
	}
	require.Equal(t, d.leaf.NotAfter.UTC().Format(time.RFC3339), d.NotAfter)
	require.Equal(t, d.leaf.NotAfter.Add(-renewBefore).UTC().Format(time.RFC3339), d.RenewAfter, "renewed 30 days before it expires")
	require.Equal(t, d.root.Subject.CommonName, d.Issuer)
	require.WithinDuration(t, time.Now().Add(leafLifetime), d.leaf.NotAfter, time.Minute)
	require.False(t, d.leaf.IsCA)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, d.leaf.ExtKeyUsage)
	require.Equal(t, keySecret, d.Key.Secret)
	require.NoError(t, keyMatches(conformance.Provisioned{Secrets: res.Secrets}, conformance.Provisioned{Result: res.Data}))

	info, err := os.Stat(filepath.Join(dataDir, keyFileName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	info, err = os.Stat(filepath.Join(dataDir, rootFileName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func mustParse(t *testing.T, text []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCertificate(text)
	require.NoError(t, err)
	return c
}

// A second provision with the same names, given back the key, returns the same
// certificate, also after a restart of the plugin; other names or a lost key get a new
// one, and after a deprovision the next provision issues anew.
func TestProvisionAgainGivesTheSameCertificate(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	ctx := context.Background()
	rc, _ := start(t, dataDir)
	first, err := rc.Provision(ctx, provisionReq("web", request, nil))
	require.NoError(t, err)
	serial := decode(t, first.Data).leaf.SerialNumber

	reordered := `{"domains":["www.acme.localhost","feeds.acme.localhost"]}`
	again, err := rc.Provision(ctx, provisionReq("web", reordered, first.Secrets))
	require.NoError(t, err)
	require.Equal(t, serial, decode(t, again.Data).leaf.SerialNumber, "same names in another order")
	require.Equal(t, first.Secrets, again.Secrets)

	restarted, _ := start(t, dataDir)
	after, err := restarted.Provision(ctx, provisionReq("web", request, first.Secrets))
	require.NoError(t, err)
	require.Equal(t, serial, decode(t, after.Data).leaf.SerialNumber, "after a restart")
	require.True(t, decode(t, first.Data).root.Equal(decode(t, after.Data).root), "the CA is kept across restarts")

	lost, err := restarted.Provision(ctx, provisionReq("web", request, nil))
	require.NoError(t, err)
	require.NotEqual(t, serial, decode(t, lost.Data).leaf.SerialNumber, "without its key the certificate cannot be given again")
	require.NotEqual(t, first.Secrets[keySecret], lost.Secrets[keySecret], "a new certificate has a fresh key")

	more, err := restarted.Provision(ctx, provisionReq("web", `{"domains":["feeds.acme.localhost","www.acme.localhost","api.acme.localhost"]}`, lost.Secrets))
	require.NoError(t, err)
	require.NotEqual(t, decode(t, lost.Data).leaf.SerialNumber, decode(t, more.Data).leaf.SerialNumber, "other names")
	require.ElementsMatch(t, []string{"feeds.acme.localhost", "www.acme.localhost", "api.acme.localhost"}, decode(t, more.Data).leaf.DNSNames)

	require.NoError(t, restarted.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.TLS}))
	fresh, err := restarted.Provision(ctx, provisionReq("web", `{"domains":["feeds.acme.localhost","www.acme.localhost","api.acme.localhost"]}`, more.Secrets))
	require.NoError(t, err)
	require.NotEqual(t, decode(t, more.Data).leaf.SerialNumber, decode(t, fresh.Data).leaf.SerialNumber, "a deprovision forgets the certificate")
}

// The private key is only in Result.Secrets: neither the result nor the plugin's logs
// hold it or any line of it, and the data dir keeps no copy.
func TestKeyNeverInResultOrLogs(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	rc, logs := start(t, dataDir)
	ctx := context.Background()
	res, err := rc.Provision(ctx, provisionReq("web", request, nil))
	require.NoError(t, err)
	_, err = rc.Provision(ctx, provisionReq("web", request, res.Secrets))
	require.NoError(t, err)
	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.TLS}))

	key := res.Secrets[keySecret]
	require.Contains(t, string(key), "PRIVATE KEY")
	text := logs.String()
	require.Contains(t, text, "certificate issued", "the logs were captured")
	var lines []string
	for _, l := range strings.Split(string(key), "\n") {
		if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
			lines = append(lines, l)
		}
	}
	require.NotEmpty(t, lines)
	for _, l := range lines {
		require.NotContains(t, string(res.Data), l)
		require.NotContains(t, text, l)
	}
	require.NoError(t, filepath.Walk(dataDir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if bytes.Contains(b, []byte(l)) {
				return fmt.Errorf("%s holds the certificate's key", path)
			}
		}
		return nil
	}))
}

// Names that are not DNS names are refused naming the field, by Validate and Provision.
func TestNotADNSNameIsRefused(t *testing.T) {
	t.Parallel()
	rc, _ := start(t, t.TempDir())
	ctx := context.Background()
	long := strings.Repeat("a.", 126) + "ab" // 254 characters
	for _, c := range []struct{ name, field string }{
		{"10.0.0.1", "request/domains/1"},
		{"::1", "request/domains/1"},
		{"*.*.acme.localhost", "request/domains/1"},
		{"feeds.*.localhost", "request/domains/1"},
		{"*.localhost", "request/domains/1"},
		{long, "request/domains/1"},
		{"feeds..acme.localhost", "request/domains/1"},
		{"-feeds.acme.localhost", "request/domains/1"},
		{"Feeds.acme.localhost", "request/domains/1"},
		{"feeds.acme.localhost", "request/domains"}, // twice: the schema's uniqueItems names the array
	} {
		spec, err := json.Marshal(contract.TLSRequest{Domains: []string{"feeds.acme.localhost", c.name}})
		require.NoError(t, err)
		_, inPlugin := domains(spec) // the plugin's own check, under the client's schema check
		provisioned := func() error { _, err := rc.Provision(ctx, provisionReq("web", string(spec), nil)); return err }()
		for _, err := range []error{inPlugin, rc.Validate(ctx, contract.TLS, spec), provisioned} {
			require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%q: %v", c.name, err)
			require.True(t, strings.HasPrefix(sdk.FieldOf(err), c.field), "%q names %q", c.name, sdk.FieldOf(err))
			if len(c.name) > 3 {
				require.NotContains(t, err.Error(), c.name, "no error echoes the input")
			}
		}
	}
	for _, ok := range []string{"localhost", "xn--bcher-kva.example", strings.Repeat("a.", 125) + "abc"} {
		spec, err := json.Marshal(contract.TLSRequest{Domains: []string{ok}})
		require.NoError(t, err)
		require.NoError(t, rc.Validate(ctx, contract.TLS, spec), ok)
		_, err = domains(spec)
		require.NoError(t, err, ok)
	}
	// The plugin takes a wildcard of one leading label, though the contract's "format":
	// "hostname" refuses it before it reaches a provider.
	_, err := domains(json.RawMessage(`{"domains":["*.acme.localhost"]}`))
	require.NoError(t, err)
}

// BenchmarkProvision issues a certificate for a new instance per iteration, through the plugin.
func BenchmarkProvision(b *testing.B) {
	rc := benchStart(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		_, err := rc.Provision(ctx, provisionReq(fmt.Sprintf("i%d", i), request, nil))
		require.NoError(b, err)
	}
}

// BenchmarkProvisionAgain provisions one instance again with its key: the certificate is
// given again, none issued.
func BenchmarkProvisionAgain(b *testing.B) {
	rc := benchStart(b)
	ctx := context.Background()
	first, err := rc.Provision(ctx, provisionReq("web", request, nil))
	require.NoError(b, err)
	for b.Loop() {
		_, err := rc.Provision(ctx, provisionReq("web", request, first.Secrets))
		require.NoError(b, err)
	}
}

// BenchmarkDeprovision forgets an instance's certificate per iteration, through the plugin.
func BenchmarkDeprovision(b *testing.B) {
	rc := benchStart(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		inst := fmt.Sprintf("i%d", i)
		b.StopTimer()
		_, err := rc.Provision(ctx, provisionReq(inst, request, nil))
		require.NoError(b, err)
		b.StartTimer()
		require.NoError(b, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: inst, Type: contract.TLS}))
	}
}

func benchStart(b *testing.B) *resource.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	p, err := client.Start(ctx, binary, client.WithEnv(sdk.DataDirEnv+"="+b.TempDir()))
	require.NoError(b, err)
	b.Cleanup(p.Kill)
	require.NoError(b, p.Configure(ctx, json.RawMessage(`{}`)))
	return p.Resource()
}
