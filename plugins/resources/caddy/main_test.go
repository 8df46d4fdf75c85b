package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// The tests run the plugin against a real Caddy v2.11.9, built once for the test binary
// from the Go tool of the root module, each test with its own managed Caddy on free
// loopback ports.
var (
	binary   string
	caddyBin string
)

func TestMain(m *testing.M) {
	// Both binaries in the directory MainWithServer removes when the tests end.
	plugintest.MainWithServer(m, "caddy", func(dir string) (func(), error) {
		binary = filepath.Join(dir, "fedhost-resource-caddy")
		caddyBin = filepath.Join(dir, "caddy")
		for _, b := range [][]string{
			{"-o", binary, "."},
			// The Go tool of the root module (go.mod: tool github.com/caddyserver/caddy/v2/cmd/caddy).
			{"-o", caddyBin, "github.com/caddyserver/caddy/v2/cmd/caddy"},
		} {
			if out, err := exec.Command("go", append([]string{"build"}, b...)...).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("go build %v: %v\n%s", b, err, out)
			}
		}
		return func() {}, nil
	})
}

// testCA is a certificate authority made for a test, and the one key of every
// certificate it issues (so a conformance request can name one key secret).
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	leaf   *ecdsa.PrivateKey
	keyPEM []byte
	pool   *x509.CertPool
}

func newCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fedhost caddy test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	leaf, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, leaf: leaf, keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), pool: pool}
}

var serial struct {
	sync.Mutex
	n int64
}

// issue returns the PEM chain (leaf, CA) of a certificate for hosts.
func (ca *testCA) issue(t testing.TB, hosts ...string) string {
	t.Helper()
	serial.Lock()
	serial.n++
	n := serial.n + 1
	serial.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(n),
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leaf.PublicKey, ca.key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
}

// routeSpec is a route request to upstream, with tls when chain is set.
func routeSpec(t testing.TB, hosts []string, upstream, chain string) json.RawMessage {
	t.Helper()
	r := contract.RouteRequest{Hosts: hosts, Upstream: upstream}
	if chain != "" {
		r.TLS = &contract.RouteTLS{Certificate: chain, Key: contract.SecretRef{Secret: "tls-key"}}
	}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	return b
}

// upstream is a real HTTP server answering with its name and the host it was asked for.
func upstream(t testing.TB, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		fmt.Fprintf(w, "%s %s", name, host)
	}))
	t.Cleanup(srv.Close)
	return srv
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

// frontDoor is a plugin with its managed Caddy on free loopback ports.
type frontDoor struct {
	dataDir             string
	httpsPort, httpPort int
	settings            json.RawMessage
	plugin              *client.Plugin
	rc                  *resource.Client
	logs                *lockedBuffer
}

func freePorts(t testing.TB) (int, int) {
	t.Helper()
	a, err := child.FreePort()
	require.NoError(t, err)
	b, err := child.FreePort()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	return a, b
}

func testSettings(t testing.TB, httpsPort, httpPort int) json.RawMessage {
	b, err := json.Marshal(map[string]any{"managed": true, "binary": caddyBin, "listen": "127.0.0.1", "https_port": httpsPort, "http_port": httpPort})
	require.NoError(t, err)
	return b
}

// newFrontDoor starts the plugin on a new data dir (short, for the admin socket path).
func newFrontDoor(t testing.TB) *frontDoor {
	t.Helper()
	dir, err := os.MkdirTemp("", "fh-caddy-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of Caddy's log:\n%s", child.Tail(filepath.Join(dir, managedDirName, logFileName), 30))
		}
		os.RemoveAll(dir)
	})
	https, plain := freePorts(t)
	f := &frontDoor{dataDir: dir, httpsPort: https, httpPort: plain, settings: testSettings(t, https, plain)}
	f.start(t)
	return f
}

// start runs a plugin process on the front door's data dir and configures it.
func (f *frontDoor) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.logs = &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Debug, JSONFormat: true})
	p, err := client.Start(ctx, binary, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+f.dataDir))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, f.settings))
	f.plugin, f.rc = p, p.Resource()
}

func (f *frontDoor) provision(t testing.TB, tenant, instance string, spec json.RawMessage, key []byte) (contract.RouteResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := f.rc.Provision(ctx, resource.Request{Tenant: tenant, Instance: instance, Type: contract.Route, Spec: spec, Secrets: map[string][]byte{"tls-key": key}})
	var r contract.RouteResult
	if err == nil {
		require.NoError(t, json.Unmarshal(res.Data, &r))
	}
	return r, err
}

func (f *frontDoor) deprovision(t testing.TB, tenant, instance string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, f.rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: instance, Type: contract.Route}))
}

// client returns an HTTP client that sends every connection to the front door's ports on
// loopback, whatever host a URL names, and trusts ca.
func (f *frontDoor) client(ca *testCA) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	tr := &http.Transport{DialContext: dial, ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{}}
	if ca != nil {
		tr.TLSClientConfig.RootCAs = ca.pool
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (f *frontDoor) httpsURL(host, path string) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(f.httpsPort)) + path
}

func (f *frontDoor) httpURL(host, path string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(f.httpPort)) + path
}

// get returns the status and body of GET url.
func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// caddyPid is the managed Caddy's process id, from its pid file.
func (f *frontDoor) caddyPid(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dataDir, managedDirName, pidFileName))
	require.NoError(t, err)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	require.NoError(t, err)
	return pid
}
