package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	// Each tenant has names of its own, in one zone: the kit gives every tenant the same
	// secrets, copied before it asks for a tenant's request, so the zone's update key is
	// known at the start.
	zone, upd, secrets := newZone(t)
	conformance.Resource(t, pluginBinary, conformance.ResourceCase{
		Type:     contract.TLS,
		Settings: settingsJSON(dir),
		RequestFor: func(tenant string) json.RawMessage {
			return tlsRequest([]string{tenant + "." + zone, "www." + tenant + "." + zone}, "dns-01", upd)
		},
		Secrets:      secrets,
		Invalid:      json.RawMessage(`{"domains":["feeds.acme.test"],"challenge":"dns-01"}`),
		InvalidField: "request/dns",
		Access: func(_ context.Context, from, to conformance.Provisioned) error {
			return keyMatches(from.Secrets, to.Result)
		},
		Exists: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			_, err := os.Stat(filepath.Join(dir, issuedDir, p.Tenant, p.Instance+".json"))
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return err == nil, err
		},
	})
}

// verify checks that the chain of d verifies for each name against pebble's root of
// this run.
func verify(t *testing.T, d decoded, names []string) {
	t.Helper()
	root, err := pebble.Root(context.Background())
	require.NoError(t, err)
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root)
	for _, c := range d.chain[1:] {
		inter.AddCert(c)
	}
	for _, n := range names {
		_, err := d.chain[0].Verify(x509.VerifyOptions{DNSName: n, Roots: roots, Intermediates: inter})
		require.NoError(t, err, "the chain verifies for %s against pebble's root", n)
	}
	require.ElementsMatch(t, names, d.chain[0].DNSNames)
}

// countingTransport counts the requests the provider sends to the CA.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

func countRequests(p *provider) *countingTransport {
	ct := &countingTransport{base: p.cfg.httpClient.Transport}
	p.cfg.httpClient.Transport = ct
	return ct
}

// A DNS-01 issuance through the zone's own update key gives a chain that verifies for
// each name against pebble's root; the key leaves in the secrets alone; a second
// provision with the same names and secrets gives the same certificate without asking
// the CA; other names give another certificate.
func TestDNS01IssuanceAndIdempotence(t *testing.T) {
	t.Parallel()
	p := setup(t)
	zone, upd, tsig := newZone(t)
	names := []string{"feeds." + zone, zone}
	spec := tlsRequest(names, "dns-01", upd)
	d, secrets := provision(t, p, "acme1", spec, tsig)
	verify(t, d, names)
	require.NoError(t, keyMatches(secrets, mustJSON(t, d.TLSResult)))
	require.Equal(t, d.chain[0].Issuer.CommonName, d.Issuer)
	require.True(t, strings.HasPrefix(d.Issuer, "Pebble Intermediate CA"), d.Issuer)
	notAfter, err := time.Parse(time.RFC3339, d.NotAfter)
	require.NoError(t, err)
	renew, err := time.Parse(time.RFC3339, d.RenewAfter)
	require.NoError(t, err)
	require.Equal(t, 30*24*time.Hour, notAfter.Sub(renew), "renewed 30 days before the end by default")
	require.Contains(t, secrets, accountKeySecret)
	for name, v := range secrets {
		require.NotContains(t, string(mustJSON(t, d.TLSResult)), string(v), "secret %s is in the result", name)
	}

	ct := countRequests(p)
	again, secrets2 := provision(t, p, "acme1", spec, with(tsig, secrets))
	require.Equal(t, d.chain[0].SerialNumber, again.chain[0].SerialNumber, "the same certificate")
	require.Equal(t, secrets, secrets2)
	require.Zero(t, ct.n.Load(), "no request to the CA for a certificate that is still good")

	other, _ := provision(t, p, "acme1", tlsRequest(names[:1], "dns-01", upd), with(tsig, secrets))
	require.NotEqual(t, d.chain[0].SerialNumber, other.chain[0].SerialNumber, "other names, another certificate")
	require.Equal(t, names[:1], other.chain[0].DNSNames)
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// Once its renewal time has passed, a provision gives a new certificate with a new
// serial and key, from the same account found again by its key.
func TestRenewAfterRenewTime(t *testing.T) {
	t.Parallel()
	p := setup(t)
	zone, upd, tsig := newZone(t)
	spec := tlsRequest([]string{zone}, "", upd)
	d, secrets := provision(t, p, "acme2", spec, tsig)
	renew, err := time.Parse(time.RFC3339, d.RenewAfter)
	require.NoError(t, err)

	p.now = func() time.Time { return renew.Add(-time.Minute) }
	same, _ := provision(t, p, "acme2", spec, with(tsig, secrets))
	require.Equal(t, d.chain[0].SerialNumber, same.chain[0].SerialNumber, "before renew_after: the same certificate")

	p.now = func() time.Time { return renew.Add(time.Minute) }
	renewed, secrets2 := provision(t, p, "acme2", spec, with(tsig, secrets))
	require.NotEqual(t, d.chain[0].SerialNumber, renewed.chain[0].SerialNumber, "after renew_after: a new certificate")
	require.NotEqual(t, string(secrets[keySecret]), string(secrets2[keySecret]), "with a new key")
	require.Equal(t, string(secrets[accountKeySecret]), string(secrets2[accountKeySecret]), "from the same account")
	verify(t, renewed, []string{zone})
}

// An HTTP-01 issuance: pebble resolves the name to 127.0.0.1 through named and fetches
// the answer from the plugin's listener.
func TestHTTP01Issuance(t *testing.T) {
	t.Parallel()
	p := setup(t)
	zone, _, _ := newZone(t)
	d, _ := provision(t, p, "acme3", tlsRequest([]string{zone}, "http-01", nil), nil)
	verify(t, d, []string{zone})
}

// A wrong TSIG secret: the DNS update of the answer is refused; the error names the
// domain and the request's dns, and holds no secret.
func TestBadUpdateKeyIsReported(t *testing.T) {
	t.Parallel()
	p := setup(t)
	zone, upd, tsig := newZone(t)
	wrong := "c2VjcmV0LXRoYXQtaXMtbm90LXRoZS16b25lcy1rZXk="
	tsig[upd.Secret.Secret] = []byte(wrong)
	_, err := p.Provision(context.Background(), resource.Request{Tenant: "acme4", Instance: "main", Type: contract.TLS, Spec: tlsRequest([]string{zone}, "dns-01", upd), Secrets: tsig})
	require.Error(t, err)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), err.Error())
	require.Equal(t, "request/dns", sdk.FieldOf(err))
	require.Contains(t, err.Error(), zone)
	require.Contains(t, err.Error(), "bad authentication", "the TSIG signature refused")
	require.NotContains(t, err.Error(), wrong)
	_, statErr := os.Stat(p.issuedPath("acme4", "main"))
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing kept of a failed order")
}

// A name the CA refuses: the error names the domain's field, the domain and the ACME
// problem type.
func TestCAProblemNamesDomainAndType(t *testing.T) {
	t.Parallel()
	p := setup(t)
	zone, upd, tsig := newZone(t)
	bad := "www." + blocked
	_, err := p.Provision(context.Background(), resource.Request{Tenant: "acme5", Instance: "main", Type: contract.TLS, Spec: tlsRequest([]string{zone, bad}, "dns-01", upd), Secrets: tsig})
	require.Error(t, err)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), err.Error())
	require.Equal(t, "request/domains/1", sdk.FieldOf(err), err.Error())
	require.Contains(t, err.Error(), bad)
	require.Contains(t, err.Error(), "urn:ietf:params:acme:error:rejectedIdentifier")
}

// HTTP-01 with nothing on the port pebble connects to: pebble's problem
// (urn:ietf:params:acme:error:connection) names the domain, and no token is in the error.
func TestHTTP01WithoutListenerNamesProblem(t *testing.T) {
	t.Parallel()
	p := newProvider()
	var s map[string]any
	require.NoError(t, json.Unmarshal(settingsJSON(t.TempDir()), &s))
	s["http01_address"] = "127.0.0.2:1" // listening there, pebble connects to 127.0.0.1
	raw, _ := json.Marshal(s)
	require.NoError(t, p.Configure(context.Background(), raw))
	zone, _, _ := newZone(t)
	_, err := p.Provision(context.Background(), resource.Request{Tenant: "acme6", Instance: "main", Type: contract.TLS, Spec: tlsRequest([]string{zone}, "http-01", nil)})
	require.Error(t, err)
	require.Equal(t, "request/domains/0", sdk.FieldOf(err), err.Error())
	require.Contains(t, err.Error(), zone)
	require.Contains(t, err.Error(), "urn:ietf:params:acme:error:")
	require.NotRegexp(t, tokenRE, err.Error())
}

func TestValidate(t *testing.T) {
	t.Parallel()
	p := newProvider()
	require.NoError(t, p.Configure(context.Background(), json.RawMessage(`{"directory_url":"https://ca.invalid/dir","dir":"`+t.TempDir()+`"}`)))
	upd := &contract.DNSUpdate{Server: "192.0.2.1:53", KeyName: "k.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "s"}}
	for _, c := range []struct {
		spec  json.RawMessage
		field string
	}{
		{tlsRequest([]string{"a.example"}, "", upd), ""},
		{tlsRequest([]string{"*.a.example"}, "dns-01", upd), ""},
		{tlsRequest([]string{"a.example"}, "dns-01", nil), "request/dns"},
		{tlsRequest([]string{"a.example"}, "", nil), "request/dns"},
		{tlsRequest([]string{"a.example"}, "http-01", nil), "request/challenge"},
		{tlsRequest([]string{"a.example", "10.0.0.1"}, "dns-01", upd), "request/domains/1"},
		{tlsRequest([]string{"A.example"}, "dns-01", upd), "request/domains/0"},
		{tlsRequest(nil, "dns-01", upd), "request/domains"},
		{tlsRequest([]string{"a.example"}, "tls-alpn-01", upd), "request/challenge"},
		{tlsRequest([]string{"a.example"}, "dns-01", &contract.DNSUpdate{Server: "primary", KeyName: "k.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "s"}}), "request/dns/server"},
		{tlsRequest([]string{"a.example"}, "dns-01", &contract.DNSUpdate{Server: "192.0.2.1:53", KeyName: "k.", Algorithm: "hmac-md5", Secret: contract.SecretRef{Secret: "s"}}), "request/dns/algorithm"},
	} {
		err := p.Validate(context.Background(), "t", c.spec)
		if c.field == "" {
			require.NoError(t, err, string(c.spec))
			continue
		}
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), string(c.spec))
		require.Equal(t, c.field, sdk.FieldOf(err), string(c.spec))
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	for raw, field := range map[string]string{
		`{"directory_url":"http://ca.example/dir"}`:                                   "settings/directory_url",
		`{"directory_url":"https://ca.example/dir","key_type":"ed25519"}`:             "settings/key_type",
		`{"directory_url":"https://ca.example/dir","resolvers":["10.0.0.1"]}`:         "settings/resolvers/0",
		`{"directory_url":"https://ca.example/dir","http01_address":"localhost"}`:     "settings/http01_address",
		`{"directory_url":"https://ca.example/dir","ca_certificates":"/nonexistent"}`: "settings/ca_certificates",
		`{"directory_url":"https://ca.example/dir","renew_before_days":400}`:          "settings/renew_before_days",
	} {
		_, err := parseSettings(json.RawMessage(raw))
		require.Equal(t, field, sdk.FieldOf(err), raw)
	}
}

// A contact address the CA refuses: the error names settings/email and the problem type.
func TestRegistrationProblemNamesEmail(t *testing.T) {
	t.Parallel()
	var s map[string]any
	require.NoError(t, json.Unmarshal(settingsJSON(t.TempDir()), &s))
	s["email"] = "two@addresses@acme.test"
	raw, _ := json.Marshal(s)
	p := newProvider()
	require.NoError(t, p.Configure(context.Background(), raw))
	zone, upd, tsig := newZone(t)
	_, err := p.Provision(context.Background(), resource.Request{Tenant: "acme7", Instance: "main", Type: contract.TLS, Spec: tlsRequest([]string{zone}, "dns-01", upd), Secrets: tsig})
	require.Error(t, err)
	require.Equal(t, "settings/email", sdk.FieldOf(err), err.Error())
	require.Contains(t, err.Error(), "urn:ietf:params:acme:error:invalidContact")
}

// With issuer_root set, each result names the private root the chain ends at, so that
// the deployment's nodes can trust it; without it, none.
func TestIssuerRootIsHandedOn(t *testing.T) {
	t.Parallel()
	root, err := pebble.Root(context.Background())
	require.NoError(t, err)
	rootFile := filepath.Join(t.TempDir(), "root.pem")
	require.NoError(t, os.WriteFile(rootFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw}), 0o600))
	var s map[string]any
	require.NoError(t, json.Unmarshal(settingsJSON(t.TempDir()), &s))
	s["issuer_root"] = rootFile
	raw, _ := json.Marshal(s)
	p := newProvider()
	require.NoError(t, p.Configure(context.Background(), raw))

	zone, upd, tsig := newZone(t)
	d, _ := provision(t, p, "acmeroot", tlsRequest([]string{zone}, "dns-01", upd), tsig)
	b, _ := pem.Decode([]byte(d.CA))
	require.NotNil(t, b, "the result names the root")
	require.Equal(t, root.Raw, b.Bytes)
	plain, _ := provision(t, setup(t), "acmeroot", tlsRequest([]string{zone}, "dns-01", upd), tsig)
	require.Empty(t, plain.CA, "no root named without issuer_root")

	// A file that is not one CA certificate is refused, naming the setting.
	leafFile := filepath.Join(t.TempDir(), "leaf.pem")
	require.NoError(t, os.WriteFile(leafFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d.chain[0].Raw}), 0o600))
	for _, f := range []string{leafFile, rootFile + ".missing"} {
		s["issuer_root"] = f
		raw, _ := json.Marshal(s)
		_, err := parseSettings(raw)
		require.Equal(t, "settings/issuer_root", sdk.FieldOf(err), f)
	}
}
