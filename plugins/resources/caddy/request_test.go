package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestParseRequestNamesTheField(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	chain := ca.issue(t, "feeds.acme.test", "*.media.acme.test")
	expired := newCA(t)
	cases := []struct {
		name, spec, field string
	}{
		{"no hosts", `{"hosts": [], "upstream": "127.0.0.1:8080"}`, "request/hosts"},
		{"not a host", `{"hosts": ["feeds.acme.test", "feeds acme"], "upstream": "127.0.0.1:8080"}`, "request/hosts/1"},
		{"wildcard", `{"hosts": ["*.acme.test"], "upstream": "127.0.0.1:8080"}`, "request/hosts/0"},
		{"port in host", `{"hosts": ["feeds.acme.test:443"], "upstream": "127.0.0.1:8080"}`, "request/hosts/0"},
		{"twice", `{"hosts": ["feeds.acme.test", "FEEDS.acme.test"], "upstream": "127.0.0.1:8080"}`, "request/hosts/1"},
		{"no port", `{"hosts": ["feeds.acme.test"], "upstream": "127.0.0.1"}`, "request/upstream"},
		{"bad port", `{"hosts": ["feeds.acme.test"], "upstream": "127.0.0.1:99999"}`, "request/upstream"},
		{"url upstream", `{"hosts": ["feeds.acme.test"], "upstream": "http://node:8080"}`, "request/upstream"},
		{"unknown field", `{"hosts": ["feeds.acme.test"], "upstream": "node:8080", "port": 1}`, "request"},
		{"not pem", mustSpec(t, []string{"feeds.acme.test"}, "garbage"), "request/tls/certificate"},
		{"a key in the chain", mustSpec(t, []string{"feeds.acme.test"}, chain+string(ca.keyPEM)), "request/tls/certificate"},
		{"not covered", mustSpec(t, []string{"feeds.acme.test", "www.acme.test"}, chain), "request/hosts/1"},
		{"wildcard covers one label only", mustSpec(t, []string{"a.b.media.acme.test"}, chain), "request/hosts/0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseRequest(json.RawMessage(c.spec), time.Now())
			require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
			require.Equal(t, c.field, sdk.FieldOf(err), "%v", err)
		})
	}
	// A certificate past its end is refused, naming when it ended.
	_, err := parseRequest(mustRaw(t, []string{"feeds.acme.test"}, expired.issue(t, "feeds.acme.test")), time.Now().Add(48*time.Hour))
	require.Equal(t, "request/tls/certificate", sdk.FieldOf(err))
	require.Contains(t, err.Error(), "expired")

	r, err := parseRequest(mustRaw(t, []string{"Feeds.Acme.Test", "x.media.acme.test"}, chain), time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"feeds.acme.test", "x.media.acme.test"}, r.Hosts, "host names in lower case")

	require.NoError(t, checkKey(chain, ca.keyPEM))
	require.Equal(t, "request/tls/key", sdk.FieldOf(checkKey(chain, nil)))
	require.Equal(t, "request/tls/key", sdk.FieldOf(checkKey(chain, newCA(t).keyPEM)), "another certificate's key")
}

func mustRaw(t testing.TB, hosts []string, chain string) json.RawMessage {
	return json.RawMessage(mustSpec(t, hosts, chain))
}

func mustSpec(t testing.TB, hosts []string, chain string) string {
	t.Helper()
	b, err := json.Marshal(contract.RouteRequest{Hosts: hosts, Upstream: "node:8080", TLS: &contract.RouteTLS{Certificate: chain, Key: contract.SecretRef{Secret: "k"}}})
	require.NoError(t, err)
	return string(b)
}

func TestURLs(t *testing.T) {
	t.Parallel()
	std := settings{HTTPSPort: 443, HTTPPort: 80}
	require.Equal(t, []string{"https://feeds.acme.test/"}, urls([]string{"feeds.acme.test"}, true, std))
	require.Equal(t, []string{"http://feeds.acme.test/"}, urls([]string{"feeds.acme.test"}, false, std))
	local := settings{HTTPSPort: 8443, HTTPPort: 8000}
	require.Equal(t, []string{"https://feeds.acme.test:8443/", "https://www.acme.test:8443/"}, urls([]string{"feeds.acme.test", "www.acme.test"}, true, local))
	require.Equal(t, []string{"http://feeds.acme.test:8000/"}, urls([]string{"feeds.acme.test"}, false, local))
}

func TestParseSettings(t *testing.T) {
	t.Parallel()
	s, err := parseSettings(json.RawMessage(`{"managed": true, "listen": "127.0.0.1", "https_port": 8443, "http_port": 8000}`))
	require.NoError(t, err)
	require.True(t, *s.Managed)
	require.Equal(t, 8443, s.HTTPSPort)
	s, err = parseSettings(nil)
	require.NoError(t, err)
	require.True(t, *s.Managed, "managed by default")
	require.Equal(t, 443, s.HTTPSPort)
	require.Equal(t, 80, s.HTTPPort)
	for raw, field := range map[string]string{
		`{"managed": true, "admin_socket": "/run/caddy.sock"}`: "settings/admin_socket",
		`{"managed": false}`:                                  "settings/admin_socket",
		`{"admin_socket": "relative.sock"}`:                   "settings/admin_socket",
		`{"admin_socket": "/run/caddy.sock", "binary": "/x"}`: "settings/binary",
		`{"listen": "127.0.0.1:80"}`:                          "settings/listen",
		`{"https_port": 8000, "http_port": 8000}`:             "settings/http_port",
		`{"https_port": "443"}`:                               "settings",
	} {
		_, err := parseSettings(json.RawMessage(raw))
		require.Equal(t, field, sdk.FieldOf(err), "%s: %v", raw, err)
	}
}

// TestValidateDoesNotTouchCaddy: Validate answers before any Configure, with no Caddy.
func TestValidateDoesNotTouchCaddy(t *testing.T) {
	t.Parallel()
	p := newProvider()
	ca := newCA(t)
	err := p.Validate(context.Background(), contract.Route, mustRaw(t, []string{"feeds.acme.test", "www.acme.test"}, ca.issue(t, "feeds.acme.test")))
	require.Equal(t, "request/hosts/1", sdk.FieldOf(err))
	require.Contains(t, err.Error(), "www.acme.test")
	require.NoError(t, p.Validate(context.Background(), contract.Route, json.RawMessage(`{"hosts": ["feeds.acme.test"], "upstream": "[::1]:8080"}`)))
}

// TestRecordsAreKeptPrivate: the route records and keys are 0600 in 0700 directories.
func TestRecordsAreKeptPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := store{dir: dir}
	ca := newCA(t)
	r := &record{Tenant: "acme", Instance: "miniflux-route", Hosts: []string{"feeds.acme.test"}, Upstream: "node:8080", Certificate: ca.issue(t, "feeds.acme.test"), key: ca.keyPEM}
	require.NoError(t, st.save(r))
	jsonPath, keyPath := st.paths("acme", "miniflux-route")
	for _, p := range []string{jsonPath, keyPath} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
	fi, err := os.Stat(filepath.Dir(jsonPath))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NotContains(t, string(b), "PRIVATE KEY", "the key is only in its own file")
	rs, err := st.load()
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.True(t, rs[0].same(r))
	require.NoError(t, st.remove("acme", "miniflux-route"))
	rs, err = st.load()
	require.NoError(t, err)
	require.Empty(t, rs)
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"hosts": ["feeds.acme.test"], "upstream": "127.0.0.1:8080"}`))
	f.Add([]byte(`{"hosts": ["a.b"], "upstream": "[::1]:1", "tls": {"certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "key": {"secret": "k"}}}`))
	f.Fuzz(func(t *testing.T, spec []byte) {
		r, err := parseRequest(spec, time.Now())
		if err != nil {
			if sdk.CodeOf(err) != sdk.CodeInvalid || sdk.FieldOf(err) == "" {
				t.Fatalf("a refusal without a field: %v", err)
			}
			return
		}
		for _, h := range r.Hosts {
			if !validHost(h) {
				t.Fatalf("accepted host %q", h)
			}
		}
		if checkUpstream(r.Upstream) != nil {
			t.Fatalf("accepted upstream %q", r.Upstream)
		}
	})
}

// TestTakenPortIsReported: Configure fails, naming the port settings, when Caddy cannot
// bind https_port.
func TestTakenPortIsReported(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	dir, err := os.MkdirTemp("", "fh-caddy-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	_, plain := freePorts(t)
	p, err := client.Start(context.Background(), binary, client.WithEnv(sdk.DataDirEnv+"="+dir))
	require.NoError(t, err)
	defer p.Kill()
	err = p.Configure(context.Background(), testSettings(t, l.Addr().(*net.TCPAddr).Port, plain))
	require.ErrorContains(t, err, "https_port")
	require.ErrorContains(t, err, "address already in use")
}
