package ui_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/ui"
)

// setupFrontDoor is setup with a catalog of the real Miniflux plugin (whose hostName
// option gives it feeds.<domain>), an environment with a tls and a route provider (and a
// dns provider when withDNS), a front door on 203.0.113.7 and 2001:db8::7, and the
// suggested domain {namespace}.localhost. The providers are named, not run: the pages
// read what builds stored.
func setupFrontDoor(t *testing.T, withDNS bool) *bundle {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fedhost-app-miniflux")
	out, err := exec.Command("go", "build", "-o", bin, "../plugins/apps/miniflux").CombinedOutput()
	require.NoError(t, err, "go build miniflux: %s", out)
	sum, err := pluginclient.FileSHA256(bin)
	require.NoError(t, err)
	require.NoError(t, plugins.Lock{"fedhost-app-miniflux": sum}.Write(dir))
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	env := []config.Resource{{Type: contract.TLS, Provider: "acme"}, {Type: contract.Route, Provider: "caddy"}}
	if withDNS {
		env = append(env, config.Resource{Type: contract.DNS, Provider: "rfc2136"})
	}
	return setupWith(t, func(o *deploy.Options, d *ui.Deps) {
		o.Plugins, o.Catalog, o.Environment = m, cat, env
		o.FrontDoor = deploy.FrontDoor{Addresses: []string{"203.0.113.7", "2001:db8::7"}, HTTPSPort: 443, HTTPPort: 80}
		d.Plugins, d.SuggestedDomain = m, "{namespace}.localhost"
	})
}

// frontDoorSite is a deployment of alice's that runs Miniflux on domain, deployed once,
// whose certificate (issued by "Pebble Intermediate CA") expires at notAfter and is
// renewed from 30 days before; with its route, and with the zone when zone is set.
func frontDoorSite(t *testing.T, b *bundle, domain string, notAfter time.Time, zone *contract.DNSResult) store.Deployment {
	t.Helper()
	ctx := context.Background()
	d := b.create(t, "alice", "alice-news")
	cfg, err := b.engine.Catalog().WithDefaults(json.RawMessage(`{"domain":"` + domain + `","apps":{"miniflux":{"enable":true}}}`))
	require.NoError(t, err)
	build, err := b.st.SubmitBuild(ctx, d.ID, store.OperationDeploy, store.Submission{Config: string(cfg), SecretRefs: "{}", Domain: domain})
	require.NoError(t, err)
	require.NoError(t, b.st.SetBuildState(ctx, build.ID, store.BuildRunning, ""))
	require.NoError(t, b.st.SetBuildState(ctx, build.ID, store.BuildSucceeded, ""))
	activate(t, b, d)
	host := "feeds." + domain
	spec, _ := json.Marshal(contract.TLSRequest{Domains: []string{host}})
	res, _ := json.Marshal(contract.TLSResult{Certificate: certificatePEM(t, host, notAfter), Key: contract.SecretRef{Secret: "alice-news/miniflux-tls-creds/key@v1"},
		NotAfter: notAfter.Format(time.RFC3339), RenewAfter: notAfter.Add(-30 * 24 * time.Hour).Format(time.RFC3339)})
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-tls", App: "miniflux", Type: contract.TLS, Provider: "acme",
		Spec: string(spec), Result: string(res), State: store.ResourceProvisioned}))
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-route", App: "miniflux", Type: contract.Route, Provider: "caddy",
		Spec: "{}", Result: `{"urls":["https://` + host + `/"]}`, State: store.ResourceProvisioned}))
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-web", App: "miniflux", Type: contract.Instance,
		State: store.ResourceProvisioned, Result: `{"state":"running","addresses":{"http":"127.0.0.1:18080"}}`}))
	if zone != nil {
		raw, _ := json.Marshal(zone)
		require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "domain-dns", Type: contract.DNS, Provider: "rfc2136",
			Spec: "{}", Result: string(raw), State: store.ResourceProvisioned}))
	}
	d, err = b.st.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	return d
}

// certificatePEM is a certificate of host issued by "Pebble Intermediate CA".
func certificatePEM(t *testing.T, host string, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Pebble Intermediate CA"}, NotBefore: notAfter.Add(-90 * 24 * time.Hour), NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}, NotBefore: notAfter.Add(-90 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// servedZone is acme.example.org as the dns provider serves it: the A record of feeds,
// not yet its AAAA record.
var servedZone = &contract.DNSResult{Zone: "acme.example.org", Nameservers: []string{"ns1.fedhost.example.", "ns2.fedhost.example."},
	Records: []contract.DNSRecord{{Name: "feeds", Type: "A", Value: "203.0.113.7", TTL: 300}},
	Update:  &contract.DNSUpdate{Server: "192.0.2.53:53", KeyName: "alice-news.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "alice-news/domain-dns-creds/tsig@v1"}}}

// spaces collapses the white space of a page's HTML, for looking for a sentence in it.
var spaces = regexp.MustCompile(`\s+`)

// The deployment page links each app's https URL and shows its certificate (issuer,
// expiry, state), the zone's records with their states and the nameservers to delegate
// to; a failed renewal shows, with its build, while the old certificate is served.
func TestDeploymentPageShowsTheFrontDoor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupFrontDoor(t, true)
	notAfter := time.Now().Add(60 * 24 * time.Hour).UTC().Truncate(time.Minute)
	d := frontDoorSite(t, b, "acme.example.org", notAfter, servedZone)
	alice := b.as(t, "alice")

	res, page := alice.get(t, "/deployments/"+d.ID)
	require.Equal(t, http.StatusOK, res.StatusCode)
	page = spaces.ReplaceAllString(page, " ")
	app := row(t, page, "front-door-miniflux")
	require.Contains(t, app, `<a class="app-url" href="https://feeds.acme.example.org/">https://feeds.acme.example.org/</a>`)
	require.NotContains(t, app, "not live yet")
	require.Contains(t, app, `<span class="state state-valid">valid</span> <span class="muted">issued by</span> Pebble Intermediate CA`)
	require.Contains(t, app, "expires</span> <time datetime=\""+notAfter.Format(time.RFC3339)+"\">")
	require.Contains(t, page, `Delegate <strong>acme.example.org</strong> to these nameservers at its registrar: <code>ns1.fedhost.example</code>, <code>ns2.fedhost.example</code>.`)
	require.Contains(t, page, `<tr><td><code>feeds.acme.example.org</code></td><td>A</td><td><code>203.0.113.7</code></td><td><span class="state state-published">published</span></td></tr>`)
	require.Contains(t, page, `<tr><td><code>feeds.acme.example.org</code></td><td>AAAA</td><td><code>2001:db8::7</code></td><td><span class="state state-pending">pending</span></td></tr>`)
	require.NotContains(t, page, "tsig", "nothing of the zone's key")
	require.NotContains(t, page, "tls-creds", "nothing of the certificate's key")

	// The certificate is due and the renewal build failed.
	due := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Minute)
	res2, _ := json.Marshal(contract.TLSResult{Certificate: certificatePEM(t, "feeds.acme.example.org", due), Key: contract.SecretRef{Secret: "alice-news/miniflux-tls-creds/key@v1"},
		NotAfter: due.Format(time.RFC3339), RenewAfter: due.Add(-30 * 24 * time.Hour).Format(time.RFC3339), Issuer: "Pebble Intermediate CA"})
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-tls", App: "miniflux", Type: contract.TLS, Provider: "acme",
		Spec: `{"domains":["feeds.acme.example.org"]}`, Result: string(res2), State: store.ResourceProvisioned}))
	_, page = alice.get(t, "/deployments/"+d.ID)
	require.Contains(t, spaces.ReplaceAllString(row(t, page, "front-door-miniflux"), " "), `<span class="state state-renewal-due">renewal due</span>`)

	renewal, err := b.st.SubmitBuild(ctx, d.ID, store.OperationDeploy, store.Submission{Config: d.Config, SecretRefs: "{}", Domain: d.Domain})
	require.NoError(t, err)
	require.NoError(t, b.st.SetBuildState(ctx, renewal.ID, store.BuildRunning, ""))
	require.NoError(t, b.st.SetBuildState(ctx, renewal.ID, store.BuildFailed, "miniflux-tls (tls by acme): urn:ietf:params:acme:error:rateLimited"))
	_, page = alice.get(t, "/deployments/"+d.ID)
	app = spaces.ReplaceAllString(row(t, page, "front-door-miniflux"), " ")
	require.Contains(t, app, `<span class="state state-renewal-failed">renewal failed</span>`)
	require.Contains(t, app, `The renewal failed; the old certificate is still served. <a href="/builds/`+renewal.ID+`">`)
}

// Without a dns provider the page tells the operator to create the records at their DNS
// host; a domain under .localhost needs none, and the page says so.
func TestDeploymentPageAsksForTheRecordsWithoutADNSProvider(t *testing.T) {
	t.Parallel()
	b := setupFrontDoor(t, false)
	d := frontDoorSite(t, b, "acme.example.org", time.Now().Add(60*24*time.Hour), nil)
	alice := b.as(t, "alice")
	_, page := alice.get(t, "/deployments/"+d.ID)
	page = spaces.ReplaceAllString(page, " ")
	require.Contains(t, page, `This host manages no DNS: create these records at your DNS host, in the zone of <strong>acme.example.org</strong>.`)
	require.Contains(t, page, `<tr><td><code>feeds.acme.example.org</code></td><td>A</td><td><code>203.0.113.7</code></td><td><span class="state state-create-it-at-your-dns-host">create it at your DNS host</span></td></tr>`)
	require.NotContains(t, page, "Delegate")

	// A deployment on acme.localhost, suggested to a new deployment.
	local := b.create(t, "alice", "acme")
	_, page = alice.get(t, "/deployments/new")
	require.Contains(t, page, `The configuration then offers the domain <code id="new-suggested-domain">{namespace}.localhost</code>`)
	_, page = alice.get(t, "/deployments/"+local.ID+"/configure")
	require.Regexp(t, `<input[^>]* name="/domain"[^>]* value="acme\.localhost"`, page, "the configuration offers the suggested domain")
	cfg, err := b.engine.Catalog().WithDefaults(json.RawMessage(`{"domain":"acme.localhost","apps":{"miniflux":{"enable":true}}}`))
	require.NoError(t, err)
	_, err = b.st.SubmitBuild(context.Background(), local.ID, store.OperationDeploy, store.Submission{Config: string(cfg), SecretRefs: "{}", Domain: "acme.localhost"})
	require.NoError(t, err)
	_, page = alice.get(t, "/deployments/"+local.ID)
	page = spaces.ReplaceAllString(page, " ")
	require.Contains(t, page, `href="https://feeds.acme.localhost/"`)
	require.Contains(t, page, "not live yet")
	require.Contains(t, page, `<span class="state state-pending">pending</span>`, "no certificate yet")
	require.Contains(t, page, "No DNS record is needed: names under <code>.localhost</code> resolve to this computer.")
	require.False(t, strings.Contains(page, `class="records"`), "no records table")
}
