package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/porkbuntest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

var (
	porkbunOnce   sync.Once
	porkbunBinary string
	porkbunErr    error
)

// porkbunPlugin builds the porkbun registrar plugin once for the package's tests.
func porkbunPlugin(t *testing.T) string {
	t.Helper()
	porkbunOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fedhost-deploy-porkbun-")
		if err != nil {
			porkbunErr = err
			return
		}
		porkbunBinary = filepath.Join(dir, "fedhost-registrar-porkbun")
		if out, err := exec.Command("go", "build", "-o", porkbunBinary, "../../plugins/registrars/porkbun").CombinedOutput(); err != nil {
			porkbunErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, porkbunErr)
	return porkbunBinary
}

// domainBundle is an engine whose plugin manager runs the real porkbun plugin against a
// Porkbun-shaped server, and a deployment of alice on acme.test with her contact.
type domainBundle struct {
	e       *Engine
	srv     *porkbuntest.Server
	st      *store.Store
	d       store.Deployment
	contact store.Contact
}

var zoneNS = contract.DNSResult{Zone: "acme.test", Nameservers: []string{"ns1.provider.test", "ns2.provider.test"}}

func setupDomains(t *testing.T) *domainBundle {
	t.Helper()
	ctx := context.Background()
	srv := porkbuntest.Start(porkbuntest.Options{PendingFor: 300 * time.Millisecond})
	t.Cleanup(srv.Close)

	dir, keys := t.TempDir(), t.TempDir()
	bin, err := os.ReadFile(porkbunPlugin(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fedhost-registrar-porkbun"), bin, 0o755))
	sum, err := client.FileSHA256(filepath.Join(dir, "fedhost-registrar-porkbun"))
	require.NoError(t, err)
	require.NoError(t, plugins.Lock{"fedhost-registrar-porkbun": sum}.Write(dir))
	key, secret := filepath.Join(keys, "key"), filepath.Join(keys, "secret")
	require.NoError(t, os.WriteFile(key, []byte(srv.APIKey), 0o600))
	require.NoError(t, os.WriteFile(secret, []byte(srv.SecretKey), 0o600))
	settings, _ := json.Marshal(map[string]any{"api_key_file": key, "secret_api_key_file": secret, "base_url": srv.URL, "retries": 0, "timeout_seconds": 2})
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir(), Settings: func(sdk.Description) (json.RawMessage, bool) { return settings, true }})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)

	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := New(Options{Store: st, Plugins: m, DomainFollow: 10 * time.Second, DomainFollowInterval: 50 * time.Millisecond})
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Owner: "alice", Domain: "acme.test", State: StateActive, Config: "{}"})
	require.NoError(t, err)
	c, err := e.SaveContact(ctx, "alice", store.Contact{Name: "Alice Acme", Email: "alice@acme.test", Phone: "+4930123456",
		Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"})
	require.NoError(t, err)
	return &domainBundle{e: e, srv: srv, st: st, d: d, contact: c}
}

func (b *domainBundle) step(t *testing.T) error {
	t.Helper()
	r := &run{e: b.e, d: b.d}
	return r.domainStep(context.Background(), "acme.test", zoneNS)
}

func (b *domainBundle) confirm(t *testing.T) store.Domain {
	t.Helper()
	a, err := b.e.CheckDomain(context.Background(), "porkbun", "acme.test")
	require.NoError(t, err)
	require.True(t, a.Available)
	require.Equal(t, int64(9_730_000), a.PriceMicros)
	rec, err := b.e.ConfirmRegistration(context.Background(), b.d.ID, Confirmation{Registrar: "porkbun", Domain: "acme.test",
		ContactID: b.contact.ID, PriceMicros: a.PriceMicros, Currency: a.Currency})
	require.NoError(t, err)
	require.Equal(t, DomainConfirmed, rec.State)
	require.NotEmpty(t, rec.ConfirmationKey)
	return rec
}

func errCode(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Code
	}
	return ""
}

// The price is quoted, confirmed, the registration the registry keeps pending is followed
// until it is active, the nameservers are the zone's, one registration is charged, and a
// later build asks for none again.
func TestRegisterAfterConfirmingThePrice(t *testing.T) {
	t.Parallel()
	b := setupDomains(t)
	b.srv.Pending("acme.test")
	rec := b.confirm(t)
	again, err := b.e.ConfirmRegistration(context.Background(), b.d.ID, Confirmation{Registrar: "porkbun", Domain: "acme.test",
		ContactID: b.contact.ID, PriceMicros: rec.PriceMicros, Currency: rec.Currency})
	require.NoError(t, err)
	require.Equal(t, rec.ConfirmationKey, again.ConfirmationKey, "confirming the same again is the same confirmation")

	require.NoError(t, b.step(t))
	got, err := b.st.GetDomain(context.Background(), "acme.test")
	require.NoError(t, err)
	require.Equal(t, "active", got.State)
	require.Equal(t, "ns1.provider.test ns2.provider.test", got.Nameservers)
	require.NotNil(t, got.ExpiresAt)
	require.Equal(t, 1, b.srv.Creates())
	require.Equal(t, int64(973), b.srv.Charged())
	evs, err := b.st.DomainEvents(context.Background(), "acme.test", 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, store.DomainEventRegistration, evs[0].Kind)
	require.Equal(t, int64(9_730_000), evs[0].CostMicros)
	require.Equal(t, "USD", evs[0].Currency)

	b.srv.Fail(3, 503)
	require.NoError(t, b.step(t), "a later build asks a registrar that is down nothing: the domain is delegated already")
	require.Equal(t, 1, b.srv.Creates(), "a later build registers nothing again")
	require.Equal(t, int64(973), b.srv.Charged())
}

// A registrar answering 5xx fails the domain step unavailable with nothing charged, and
// the next build registers; an answer lost after the registration is carried out is
// asked again under the same key and charged once.
func TestRegistrarFaultsFailTheStepUnavailableAndTheNextBuildGoesOn(t *testing.T) {
	t.Parallel()
	b := setupDomains(t)
	b.confirm(t)
	b.srv.Fail(1, 503)
	err := b.step(t)
	require.Equal(t, CodeUnavailable, errCode(err), "%v", err)
	require.Zero(t, b.srv.Charged())
	rec, err := b.st.GetDomain(context.Background(), "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainConfirmed, rec.State)
	require.Contains(t, rec.Message, "the next build tries again")

	// The driver lists the account, checks the price, then creates: the third call's
	// answer is lost after Porkbun carried it out.
	b.srv.Delay(2, 0)
	b.srv.LoseAnswer(1, 502)
	err = b.step(t)
	require.Equal(t, CodeUnavailable, errCode(err), "%v", err)
	require.NoError(t, b.step(t))
	require.Equal(t, 1, b.srv.Creates(), "one registration for one confirmation")
	require.Equal(t, int64(973), b.srv.Charged())
}

// A registrar that does not answer in time fails the step unavailable too.
func TestRegistrarTimeoutFailsTheStepUnavailable(t *testing.T) {
	t.Parallel()
	b := setupDomains(t)
	b.confirm(t)
	b.srv.Delay(1, 4*time.Second)
	err := b.step(t)
	require.Equal(t, CodeUnavailable, errCode(err), "%v", err)
	require.Zero(t, b.srv.Charged())
}

// A price that changed between quote and confirmation is refused naming the price, and
// nothing is charged; a taken domain is refused naming the domain.
func TestChangedPriceAndTakenDomainAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	b := setupDomains(t)
	b.confirm(t)
	b.srv.Price("test", "12.00", "12.00", "12.00")
	err := b.step(t)
	require.Equal(t, CodeInvalidConfiguration, errCode(err), "%v", err)
	require.Equal(t, "/price_micros", err.(*Error).Location)
	require.Zero(t, b.srv.Charged())
	rec, err := b.st.GetDomain(context.Background(), "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainRefused, rec.State)
	require.Error(t, b.step(t), "a refused confirmation is not asked again")
	require.Zero(t, b.srv.Creates())

	b.srv.Taken("taken.test")
	a, err := b.e.CheckDomain(context.Background(), "porkbun", "taken.test")
	require.NoError(t, err)
	require.False(t, a.Available)
	_, err = b.e.CheckDomain(context.Background(), "porkbun", "Not A Domain")
	require.Equal(t, "/domain", err.(*Error).Location)
}

// A contact is checked as registries need it, and the error names the field.
func TestContactValidationNamesTheField(t *testing.T) {
	t.Parallel()
	good := store.Contact{Name: "Alice", Email: "alice@acme.test", Phone: "+4930123456", Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"}
	require.NoError(t, ValidateContact(good))
	for _, tc := range []struct {
		change func(*store.Contact)
		field  string
	}{
		{func(c *store.Contact) { c.Country = "XX" }, "/country"},
		{func(c *store.Contact) { c.Country = "de" }, "/country"},
		{func(c *store.Contact) { c.Country = "DEU" }, "/country"},
		{func(c *store.Contact) { c.Phone = "030 123456" }, "/phone"},
		{func(c *store.Contact) { c.Phone = "+49" }, "/phone"},
		{func(c *store.Contact) { c.Email = "not an address" }, "/email"},
		{func(c *store.Contact) { c.Name = " " }, "/name"},
		{func(c *store.Contact) { c.City = "a\nb" }, "/city"},
	} {
		c := good
		tc.change(&c)
		err := ValidateContact(c)
		require.Error(t, err, "%+v", c)
		require.Equal(t, tc.field, err.(*Error).Location)
		require.NotContains(t, err.Error(), c.Phone+c.Country+"x", "no error echoes the input")
	}
}

// An operator's own domain is shown the nameservers to set until the resolver answers
// them as its NS records.
func TestDelegationIsCheckedUntilItHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	answer := []string{"ns.elsewhere.test."}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		mu.Lock()
		for _, ns := range answer {
			m.Answer = append(m.Answer, &dns.NS{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 60}, Ns: ns})
		}
		mu.Unlock()
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := New(Options{Store: st, DelegationResolver: pc.LocalAddr().String()})
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "own", Owner: "bob", Domain: "acme.test", State: StateActive, Config: "{}"})
	require.NoError(t, err)
	r := &run{e: e, d: d}
	require.NoError(t, r.domainStep(ctx, "acme.test", zoneNS), "a delegation that does not hold yet fails no build")
	rec, err := st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, store.DomainDelegated, rec.Mode)
	require.Equal(t, DomainAwaitingDelegation, rec.State)
	require.Contains(t, rec.Message, "ns1.provider.test, ns2.provider.test")

	mu.Lock()
	answer = []string{"NS2.provider.test.", "ns1.provider.test."}
	mu.Unlock()
	require.NoError(t, e.Tick(ctx, time.Now().Add(30*time.Minute)))
	rec, err = st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainAwaitingDelegation, rec.State, "checked again once an hour, not at every tick")
	require.NoError(t, e.Tick(ctx, time.Now().Add(2*time.Hour)))
	rec, err = st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainDelegatedOK, rec.State, "the scheduler sees the delegation hold")
	require.Empty(t, rec.Message)

	require.NoError(t, r.domainStep(ctx, "acme.test", zoneNS))
	rec, err = st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainDelegatedOK, rec.State)
}

// The daily job lists the registrar's account, records the expiry, and renews what
// expires within 30 days by the injected clock, once, at the quoted renewal price; a
// domain whose renewal is manual is left alone.
func TestDomainRenewalWhenTheClockSaysDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDomains(t)
	created := time.Now().AddDate(0, 0, -60)
	for _, name := range []string{"acme.test", "manual.test"} {
		b.srv.Owned(name, created)
		renewal := "auto"
		if name == "manual.test" {
			renewal = "manual"
		}
		require.NoError(t, b.st.PutDomain(ctx, store.Domain{Name: name, DeploymentID: b.d.ID, Owner: "alice", Mode: store.DomainRegistered,
			Registrar: "porkbun", State: "active", Renewal: renewal}))
	}
	expires := created.UTC().Truncate(time.Second).AddDate(1, 0, 0)

	now := time.Now()
	require.NoError(t, b.e.Tick(ctx, now))
	rec, err := b.st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.NotNil(t, rec.ExpiresAt)
	require.True(t, expires.Equal(*rec.ExpiresAt), "%v", rec.ExpiresAt)
	require.Zero(t, b.srv.Charged(), "not due yet")

	due := expires.Add(-20 * 24 * time.Hour)
	require.NoError(t, b.e.runDomainRenewals(ctx, due))
	require.Equal(t, int64(1081), b.srv.Charged(), "acme.test renewed once at 10.81")
	rec, err = b.st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.True(t, expires.AddDate(1, 0, 0).Equal(*rec.ExpiresAt), "%v", rec.ExpiresAt)
	evs, err := b.st.DomainEvents(ctx, "acme.test", 10)
	require.NoError(t, err)
	require.Equal(t, store.DomainEventRenewal, evs[0].Kind)
	require.Equal(t, int64(10_810_000), evs[0].CostMicros)
	require.Equal(t, "USD", evs[0].Currency)
	manual, err := b.st.DomainEvents(ctx, "manual.test", 10)
	require.NoError(t, err)
	for _, ev := range manual {
		require.NotEqual(t, store.DomainEventRenewal, ev.Kind, "a manual domain is not renewed")
	}

	require.NoError(t, b.e.runDomainRenewals(ctx, due.Add(time.Hour)))
	require.NoError(t, b.e.runDomainRenewals(ctx, due.Add(25*time.Hour)))
	require.Equal(t, int64(1081), b.srv.Charged(), "renewed once: the next day it is not due")

	rel, err := b.e.ReleaseDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, "acme.test", rel.Domain)
	rec, err = b.st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainReleased, rec.State)
	evs, err = b.st.DomainEvents(ctx, "acme.test", 1)
	require.NoError(t, err)
	require.Equal(t, store.DomainEventRelease, evs[0].Kind)
}

// A transfer in is asked for under a key recorded first, with the auth code given to
// the registrar only; a wrong code is refused naming auth_code; the pending transfer is
// followed by the next build and recorded with its cost.
func TestTransferInIsFollowedByTheNextBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDomains(t)
	b.srv.External("acme.test", "right-code-123", time.Now().AddDate(0, 6, 0))
	confirm := TransferConfirmation{AuthCode: "wrong-code-456",
		Confirmation: Confirmation{Registrar: "porkbun", Domain: "acme.test", PriceMicros: 9_730_000, Currency: "USD"}}
	_, err := b.e.TransferDomainIn(ctx, b.d.ID, confirm)
	require.Error(t, err)
	require.Equal(t, "/auth_code", err.(*Error).Location, "%v", err)
	require.NotContains(t, err.Error(), "wrong-code-456")
	require.Zero(t, b.srv.Charged())
	refused, err := b.st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainTransferFailed, refused.State, "a refused transfer is transfer_failed")
	require.Contains(t, refused.Message, "auth code")
	require.NotContains(t, refused.Message, "wrong-code-456")
	require.NoError(t, b.step(t), "a transfer_failed domain fails no build")

	confirm.AuthCode = "right-code-123"
	rec, err := b.e.TransferDomainIn(ctx, b.d.ID, confirm)
	require.NoError(t, err)
	require.Equal(t, "pending", rec.State)
	require.NotContains(t, fmt.Sprintf("%+v", rec), "right-code-123", "the auth code is not kept")
	require.NoError(t, b.step(t))
	rec, err = b.st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, "active", rec.State)
	require.Equal(t, "ns1.provider.test ns2.provider.test", rec.Nameservers)
	require.Equal(t, int64(973), b.srv.Charged())
	evs, err := b.st.DomainEvents(ctx, "acme.test", 10)
	require.NoError(t, err)
	require.Equal(t, store.DomainEventTransferIn, evs[len(evs)-1].Kind)
	require.Equal(t, int64(9_730_000), evs[len(evs)-1].CostMicros)
}

// A registration and a transfer in are refused alike for a domain that is not the
// deployment's (the message saying which of the two was asked for) and for one another
// deployment holds; nothing is asked of the registrar.
func TestRegisterAndTransferRefuseAnotherDeploymentsDomain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDomains(t)
	other, err := b.st.CreateDeployment(ctx, store.Deployment{Namespace: "beta", Owner: "alice", Domain: "beta.test", State: StateActive, Config: "{}"})
	require.NoError(t, err)
	require.NoError(t, b.st.PutDomain(ctx, store.Domain{Name: "held.test", DeploymentID: other.ID, Owner: "alice", Mode: store.DomainDelegated,
		State: DomainAwaitingDelegation, Renewal: "auto"}))
	loose, err := b.st.CreateDeployment(ctx, store.Deployment{Namespace: "gamma", Owner: "alice", State: StateActive, Config: "{}"})
	require.NoError(t, err)

	register := func(id, domain string) error {
		_, err := b.e.ConfirmRegistration(ctx, id, Confirmation{Registrar: "porkbun", Domain: domain, ContactID: b.contact.ID, PriceMicros: 9_730_000, Currency: "USD"})
		return err
	}
	transfer := func(id, domain string) error {
		_, err := b.e.TransferDomainIn(ctx, id, TransferConfirmation{AuthCode: "code-123",
			Confirmation: Confirmation{Registrar: "porkbun", Domain: domain, PriceMicros: 9_730_000, Currency: "USD"}})
		return err
	}
	for verb, call := range map[string]func(string, string) error{"register": register, "transfer": transfer} {
		err := call(b.d.ID, "beta.test")
		require.Equal(t, CodeConflict, errCode(err), "%s: %v", verb, err)
		require.Equal(t, "/domain", err.(*Error).Location)
		require.Contains(t, err.Error(), "this deployment's domain is acme.test: "+verb+" that one")

		err = call(loose.ID, "held.test")
		require.Equal(t, CodeConflict, errCode(err), "%s: %v", verb, err)
		require.Contains(t, err.Error(), "another deployment has this domain")

		err = call(b.d.ID, "Acme.Test")
		require.Equal(t, CodeInvalidConfiguration, errCode(err), "%s: %v", verb, err)
	}
	require.Zero(t, b.srv.Creates())
	require.Zero(t, b.srv.Charged())
}

// The snapshot is taken once per DomainSnapshotEvery: a tick before it asks the
// registrar nothing, one after it lists the account again.
func TestDomainSnapshotEvery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDomains(t)
	b.e.opts.DomainSnapshotEvery = time.Minute
	now := time.Now()
	require.NoError(t, b.e.runDomainRenewals(ctx, now))
	last, err := b.st.LastSnapshot(ctx, "porkbun")
	require.NoError(t, err)
	require.WithinDuration(t, now, last, time.Second)
	require.NoError(t, b.e.runDomainRenewals(ctx, now.Add(30*time.Second)))
	again, err := b.st.LastSnapshot(ctx, "porkbun")
	require.NoError(t, err)
	require.True(t, last.Equal(again), "not due within the interval")
	require.NoError(t, b.e.runDomainRenewals(ctx, now.Add(61*time.Second)))
	again, err = b.st.LastSnapshot(ctx, "porkbun")
	require.NoError(t, err)
	require.WithinDuration(t, now.Add(61*time.Second), again, time.Second, "taken again after the interval")
}

// A registrar plugin installed without a registrar block in fedhost.hcl is not offered,
// not asked and not listed by the snapshot job.
func TestUnconfiguredRegistrarIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDomains(t)
	require.Equal(t, []string{"porkbun"}, b.e.Registrars())
	b.e.opts.Registrars = []string{}
	require.Empty(t, b.e.Registrars())
	_, err := b.e.CheckDomain(ctx, "porkbun", "acme.test")
	require.Equal(t, CodeNotFound, errCode(err), "%v", err)
	require.Equal(t, "/registrar", err.(*Error).Location)
	require.NoError(t, b.e.runDomainRenewals(ctx, time.Now()))
	last, err := b.st.LastSnapshot(ctx, "porkbun")
	require.NoError(t, err)
	require.True(t, last.IsZero(), "no snapshot of a registrar fedhost.hcl does not name")
	b.e.opts.Registrars = []string{"porkbun"}
	require.Equal(t, []string{"porkbun"}, b.e.Registrars())
}
