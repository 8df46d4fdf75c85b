package deploy

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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// frontDoorEnvironment names a provider of each front door type; dns only when withDNS.
func frontDoorEnvironment(withDNS bool) []config.Resource {
	env := []config.Resource{{Type: contract.TLS, Provider: "localca"}, {Type: contract.Route, Provider: "caddy"}}
	if withDNS {
		env = append(env, config.Resource{Type: contract.DNS, Provider: "rfc2136"})
	}
	return env
}

// leafPEM is a certificate for host issued by a CA named "Test CA", valid until notAfter.
func leafPEM(t *testing.T, host string, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Test CA"}, NotBefore: notAfter.Add(-90 * 24 * time.Hour), NotAfter: notAfter.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}, NotBefore: notAfter.Add(-90 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// tlsRow is a provisioned certificate of host in the row of app; result fields the
// provider leaves out are read from the certificate.
func tlsRow(t *testing.T, deploymentID, app, host string, res contract.TLSResult) store.Resource {
	t.Helper()
	spec, _ := json.Marshal(contract.TLSRequest{Domains: []string{host}})
	res.Key = contract.SecretRef{Secret: "acme/" + app + "-tls-creds/key@v1"}
	raw, _ := json.Marshal(res)
	return store.Resource{DeploymentID: deploymentID, Name: app + "-tls", App: app, Type: contract.TLS, Provider: "localca",
		Spec: string(spec), Result: string(raw), State: store.ResourceProvisioned}
}

// The status shows each app's URL, whether its route is live, its certificate read from
// the row (issuer and expiry from the certificate itself when the provider's result
// leaves them out) and the zone's records as the dns row publishes them, with the
// nameservers to delegate to; never the zone's update key.
func TestFrontDoorShowsURLsCertificatesAndRecords(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	e := New(Options{Environment: frontDoorEnvironment(true), FrontDoor: FrontDoor{Addresses: []string{"203.0.113.7", "2001:db8::7"}, HTTPSPort: 443, HTTPPort: 80}})
	d := store.Deployment{ID: "d1", Namespace: "acme", Domain: "acme.example", State: StateActive}
	hosts := map[string]string{"miniflux": "feeds.acme.example", "pixelfed": "photos.acme.example"}
	notAfter := now.Add(60 * 24 * time.Hour)
	zone, _ := json.Marshal(contract.DNSResult{Zone: "acme.example", Nameservers: []string{"ns1.host.example.", "ns2.host.example."},
		Records: []contract.DNSRecord{{Name: "feeds", Type: "A", Value: "203.0.113.7", TTL: 300}},
		Update:  &contract.DNSUpdate{Server: "192.0.2.1:53", KeyName: "acme.example.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "acme/domain-dns-creds/tsig-secret@v1"}}})
	rows := []store.Resource{
		{DeploymentID: d.ID, Name: domainDNS, Type: contract.DNS, Provider: "rfc2136", Spec: "{}", Result: string(zone), State: store.ResourceProvisioned},
		tlsRow(t, d.ID, "miniflux", "feeds.acme.example", contract.TLSResult{Certificate: leafPEM(t, "feeds.acme.example", notAfter), NotAfter: notAfter.Format(time.RFC3339)}),
		{DeploymentID: d.ID, Name: "miniflux-route", App: "miniflux", Type: contract.Route, Spec: "{}", Result: `{"urls":["https://feeds.acme.example/"]}`, State: store.ResourceProvisioned},
	}
	fd := e.frontDoorOf(d, hosts, rows, nil, now)
	require.Len(t, fd.Apps, 2)
	mf := fd.Apps[0]
	require.Equal(t, "miniflux", mf.App)
	require.Equal(t, "https://feeds.acme.example/", mf.URL)
	require.True(t, mf.Live)
	require.Equal(t, CertificateValid, mf.Certificate.State)
	require.Equal(t, "Test CA", mf.Certificate.Issuer, "the issuer is read from the certificate")
	require.Equal(t, notAfter, *mf.Certificate.NotAfter)
	require.Equal(t, notAfter.Add(-30*24*time.Hour), *mf.Certificate.RenewAfter, "30 days before expiry when the provider does not say")

	px := fd.Apps[1]
	require.Equal(t, "pixelfed", px.App)
	require.False(t, px.Live, "no route yet")
	require.Equal(t, CertificatePending, px.Certificate.State)

	require.Equal(t, "acme.example", fd.Zone.Name)
	require.True(t, fd.Zone.Managed)
	require.Equal(t, []string{"ns1.host.example", "ns2.host.example"}, fd.Zone.Nameservers, "as registrars take them")
	require.Equal(t, []RecordStatus{
		{Name: "feeds.acme.example", Type: "A", Value: "203.0.113.7", State: RecordPublished},
		{Name: "feeds.acme.example", Type: "AAAA", Value: "2001:db8::7", State: RecordPending},
		{Name: "photos.acme.example", Type: "A", Value: "203.0.113.7", State: RecordPending},
		{Name: "photos.acme.example", Type: "AAAA", Value: "2001:db8::7", State: RecordPending},
	}, fd.Zone.Records)
	raw, err := json.Marshal(fd)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "tsig", "the zone's update key is not shown, nor its reference")
	require.NotContains(t, string(raw), "-tls-creds", "nor the certificate key's reference")
	require.NotContains(t, string(raw), "BEGIN CERTIFICATE")

	d.State = StateFailed
	require.True(t, e.frontDoorOf(d, hosts, rows, nil, now).Apps[0].Live, "a failed build leaves the route served")
	d.State = StateSuspended
	require.False(t, e.frontDoorOf(d, hosts, rows, nil, now).Apps[0].Live, "a suspended deployment's route is not live")

	// Without a dns provider the operator creates the records; under .localhost none is needed.
	manual := New(Options{Environment: frontDoorEnvironment(false), FrontDoor: FrontDoor{Addresses: []string{"203.0.113.7"}, HTTPSPort: 8443}})
	fd = manual.frontDoorOf(d, map[string]string{"miniflux": "feeds.acme.example"}, nil, nil, now)
	require.Equal(t, "https://feeds.acme.example:8443/", fd.Apps[0].URL)
	require.False(t, fd.Zone.Managed)
	require.Empty(t, fd.Zone.Nameservers)
	require.Equal(t, []RecordStatus{{Name: "feeds.acme.example", Type: "A", Value: "203.0.113.7", State: RecordManual}}, fd.Zone.Records)
	local := store.Deployment{ID: "d2", Domain: "acme.localhost", State: StateActive}
	fd = manual.frontDoorOf(local, map[string]string{"miniflux": "feeds.acme.localhost"}, nil, nil, now)
	require.True(t, fd.Zone.Local)
	require.Empty(t, fd.Zone.Records)
}

// A certificate is valid until its renew_after, then due; renewal failed once a deploy
// build made since then failed (naming it), and expired at its not_after.
func TestCertificateStates(t *testing.T) {
	t.Parallel()
	notAfter := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	renewAfter := notAfter.Add(-30 * 24 * time.Hour)
	row := tlsRow(t, "d1", "miniflux", "feeds.acme.example", contract.TLSResult{Certificate: leafPEM(t, "feeds.acme.example", notAfter),
		NotAfter: notAfter.Format(time.RFC3339), RenewAfter: renewAfter.Format(time.RFC3339), Issuer: "fedhost local CA"})
	failed := store.Build{ID: "b-failed", Operation: store.OperationDeploy, State: store.BuildFailed, CreatedAt: renewAfter.Add(time.Hour)}
	before := store.Build{ID: "b-old", Operation: store.OperationDeploy, State: store.BuildFailed, CreatedAt: renewAfter.Add(-time.Hour)}
	backup := store.Build{ID: "b-backup", Operation: store.OperationBackup, State: store.BuildSucceeded, CreatedAt: renewAfter.Add(2 * time.Hour)}
	for _, c := range []struct {
		name   string
		now    time.Time
		builds []store.Build
		state  string
		build  string
	}{
		{"before renew_after", renewAfter.Add(-time.Minute), nil, CertificateValid, ""},
		{"due", renewAfter, nil, CertificateRenewalDue, ""},
		{"a deploy failed before it was due", renewAfter.Add(2 * time.Hour), []store.Build{before}, CertificateRenewalDue, ""},
		{"the renewal failed", renewAfter.Add(3 * time.Hour), []store.Build{backup, failed, before}, CertificateRenewalFailed, "b-failed"},
		{"expired", notAfter, []store.Build{failed}, CertificateExpired, "b-failed"},
	} {
		s := certificateStatus(row, c.now, c.builds)
		require.Equal(t, c.state, s.State, c.name)
		require.Equal(t, c.build, s.FailedBuildID, c.name)
		require.Equal(t, "fedhost local CA", s.Issuer, "the provider's issuer is taken")
	}
	row.State = store.ResourceKept
	require.Equal(t, CertificatePending, certificateStatus(row, renewAfter, nil).State)
}

// renewalBundle is an engine on a fresh store whose queue takes builds and runs none, an
// audit trail, and an active deployment with a certificate that renews at renewAfter.
type renewalBundle struct {
	e   *Engine
	st  *store.Store
	d   store.Deployment
	now time.Time
}

func newRenewalBundle(t *testing.T, renewAfter time.Time) *renewalBundle {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	b := &renewalBundle{st: st}
	b.e = New(Options{Store: st, Audit: audit.New(st, audit.Options{}), Environment: frontDoorEnvironment(false), Clock: func() time.Time { return b.now }})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	b.e.SetQueue(q)
	b.d, err = st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", State: StateActive, CatalogRevision: "r1",
		Config: `{"domain":"acme.localhost","apps":{"miniflux":{"enable":true}}}`, SecretRefs: "{}"})
	require.NoError(t, err)
	notAfter := renewAfter.Add(30 * 24 * time.Hour)
	require.NoError(t, st.PutResource(ctx, tlsRow(t, b.d.ID, "miniflux", "feeds.acme.localhost", contract.TLSResult{
		Certificate: leafPEM(t, "feeds.acme.localhost", notAfter), NotAfter: notAfter.Format(time.RFC3339), RenewAfter: renewAfter.Format(time.RFC3339)})))
	return b
}

// tick runs the scheduler's tick at now and returns the deployment's builds, newest first.
func (b *renewalBundle) tick(t *testing.T, now time.Time) []store.Build {
	t.Helper()
	b.now = now
	require.NoError(t, b.e.Tick(context.Background(), now))
	builds, err := b.st.ListBuilds(context.Background(), b.d.ID, 0)
	require.NoError(t, err)
	return builds
}

// The scheduler queues no build for a certificate that is not due; once it is due,
// exactly one deploy build of the stored configuration at the deployment's revision,
// audited as the scheduler's; none while that build is queued or running.
func TestRenewalQueuesOneBuildWhenDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second)
	b := newRenewalBundle(t, start.Add(24*time.Hour))

	require.Empty(t, b.tick(t, start), "not due for another day")
	builds := b.tick(t, start.Add(25*time.Hour))
	require.Len(t, builds, 1, "due: one build")
	require.Equal(t, store.OperationDeploy, builds[0].Operation)
	require.Equal(t, b.d.Config, builds[0].Config, "the stored configuration")
	require.Equal(t, "r1", builds[0].CatalogRevision, "at the deployment's revision")
	require.Len(t, b.tick(t, start.Add(26*time.Hour)), 1, "queued: not queued again")
	require.NoError(t, b.st.SetBuildState(ctx, builds[0].ID, store.BuildRunning, ""))
	require.Len(t, b.tick(t, start.Add(27*time.Hour)), 1, "running: not queued again")

	events, err := b.st.AuditEvents(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, "certificate_renewal", events[0].Action)
	require.Equal(t, "scheduler", events[0].Actor)
	require.Equal(t, builds[0].ID, events[0].BuildID)
	require.Equal(t, "feeds.acme.localhost", events[0].Reason)

	// The build says at its start which certificate it renews.
	r := &run{e: b.e, build: builds[0], d: b.d}
	require.NoError(t, r.load(ctx))
	r.noteRenewals()
	log, err := b.st.BuildEvents(ctx, builds[0].ID)
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Equal(t, "renewing the certificate of feeds.acme.localhost, due since "+start.Add(24*time.Hour).Format(time.RFC3339), log[0].Message)
}

// A renewal that failed is tried again at a tick an hour after it, not before; the
// page shows it failed, naming the build. A deployment that is not active (or failed)
// is not renewed.
func TestFailedRenewalRetriesAfterAnHour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second)
	b := newRenewalBundle(t, start.Add(-24*time.Hour))

	builds := b.tick(t, start)
	require.Len(t, builds, 1)
	require.NoError(t, b.st.SetBuildState(ctx, builds[0].ID, store.BuildFailed, "miniflux-tls (tls by localca): the CA is unreachable"))
	require.NoError(t, b.st.UpdateDeployment(ctx, b.d.ID, map[string]any{"state": StateFailed}))
	first := builds[0]

	builds = b.tick(t, first.CreatedAt.Add(30*time.Minute))
	require.Len(t, builds, 1, "not again within the hour")
	fd := b.e.frontDoorOf(b.d, map[string]string{"miniflux": "feeds.acme.localhost"}, mustResources(t, b), builds, b.now)
	require.Equal(t, CertificateRenewalFailed, fd.Apps[0].Certificate.State)
	require.Equal(t, first.ID, fd.Apps[0].Certificate.FailedBuildID)

	builds = b.tick(t, first.CreatedAt.Add(61*time.Minute))
	require.Len(t, builds, 2, "a failed deployment is retried after an hour")
	require.NoError(t, b.st.SetBuildState(ctx, builds[0].ID, store.BuildCanceled, ""))

	require.NoError(t, b.st.UpdateDeployment(ctx, b.d.ID, map[string]any{"state": StateSuspended}))
	require.Len(t, b.tick(t, start.Add(3*time.Hour)), 2, "a suspended deployment is not renewed")
}

func mustResources(t *testing.T, b *renewalBundle) []store.Resource {
	t.Helper()
	rows, err := b.st.Resources(context.Background(), b.d.ID)
	require.NoError(t, err)
	return rows
}

// A tls row's result comes from a provider: whatever it holds, reading it does not
// panic, and what the page shows of it is bounded printable text.
func FuzzReadCertificate(f *testing.F) {
	f.Add(`{"domains":["feeds.acme.example"]}`, `{"certificate":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n","not_after":"2026-07-01T00:00:00Z"}`)
	f.Add(`{}`, `{"certificate":"x","not_after":"2026-07-01T00:00:00Z","renew_after":"2026-06-01T00:00:00Z","issuer":"CA\u202e\u0000"}`)
	f.Fuzz(func(t *testing.T, spec, result string) {
		c, ok := readCertificate(store.Resource{Type: contract.TLS, State: store.ResourceProvisioned, Spec: spec, Result: result})
		if !ok {
			return
		}
		for _, s := range []string{c.issuer, c.host} {
			require.LessOrEqual(t, len(s), 256)
			for _, r := range s {
				require.False(t, input.Unsafe(r), "%q", s)
			}
		}
		_ = certificateStatus(store.Resource{Type: contract.TLS, State: store.ResourceProvisioned, Spec: spec, Result: result}, time.Now(), nil)
	})
}
