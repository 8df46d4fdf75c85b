package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/porkbuntest"
	"github.com/fedhost/fedhost/sdk"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

// newTransferEngine is an engine with the embedded secret provider and the real porkbun
// registrar plugin against srv, an empty catalog, and alice's contact; builds are run
// by the test.
func newTransferEngine(t *testing.T, srv *porkbuntest.Server) (*Engine, *store.Store, store.Contact) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "plugins")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	goBuild(t, filepath.Join(dir, "fedhost-resource-embedded"), "../../plugins/resources/embedded")
	bin, err := os.ReadFile(porkbunPlugin(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fedhost-registrar-porkbun"), bin, 0o755))
	lock := plugins.Lock{}
	for _, name := range []string{"fedhost-resource-embedded", "fedhost-registrar-porkbun"} {
		sum, err := pluginclient.FileSHA256(filepath.Join(dir, name))
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(dir))
	keys := t.TempDir()
	key, secret := filepath.Join(keys, "key"), filepath.Join(keys, "secret")
	require.NoError(t, os.WriteFile(key, []byte(srv.APIKey), 0o600))
	require.NoError(t, os.WriteFile(secret, []byte(srv.SecretKey), 0o600))
	porkbun, _ := json.Marshal(map[string]any{"api_key_file": key, "secret_api_key_file": secret, "base_url": srv.URL, "retries": 0, "timeout_seconds": 2})
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir(), Logger: hclog.NewNullLogger(),
		Settings: func(desc sdk.Description) (json.RawMessage, bool) {
			if desc.Name == "porkbun" {
				return porkbun, true
			}
			return nil, true
		}})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	e := New(Options{Store: st, Plugins: m, Catalog: cat, Audit: audit.New(st, audit.Options{}),
		Environment: []config.Resource{{Type: contract.Secret, Provider: "embedded"}}})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	e.SetQueue(q)
	_, err = e.RecordRevision(ctx)
	require.NoError(t, err)
	c, err := e.SaveContact(ctx, "alice", store.Contact{Name: "Alice Acme", Email: "alice@acme.test", Phone: "+4930123456",
		Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"})
	require.NoError(t, err)
	return e, st, c
}

// transferPayload is a migration of a deployment with domain and its auth code.
func transferPayload(namespace, domain, authCode string) migration.Payload {
	now := time.Now()
	return migration.Payload{ID: strings.Repeat("ab", 16), CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
		Source:     migration.Source{URL: "http://127.0.0.1:9", ConfirmToken: strings.Repeat("c", 32)},
		Deployment: migration.Deployment{ID: "source-id", Name: namespace, Namespace: namespace}, CatalogRevision: "r1",
		Versions: map[string]string{}, Config: json.RawMessage(fmt.Sprintf(`{"domain":%q,"apps":{}}`, domain)),
		Domain: migration.Domain{Name: domain, Registered: true, AuthCode: authCode}}
}

// The preview quotes the transfer at this host's registrar (its transfer price, the
// operator's contact); a confirmation at another price or with another's contact is
// refused before anything is stored. The confirmed import keeps the auth code apart in
// the secret resource; the first build asks for the transfer after the restore and the
// users, and a registrar that does not answer keeps the code with a warning; the next
// build's transfer carries the auth code (the registry takes no other), the domain is
// pending at porkbun with the contact, one transfer is charged, and the code is deleted.
func TestImportTransfersTheDomainWithTheAuthCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := porkbuntest.Start(porkbuntest.Options{PendingFor: time.Minute})
	t.Cleanup(srv.Close)
	srv.External("acme.test", "right-code-123", time.Now().AddDate(0, 6, 0))
	e, st, contact := newTransferEngine(t, srv)
	p := transferPayload("acme", "acme.test", "right-code-123")

	plan, err := e.Import(ctx, ImportRequest{Payload: p, Owner: "alice", Preview: true})
	require.NoError(t, err)
	require.Equal(t, ImportedDomain{Name: "acme.test", Action: "transfer", Registrar: "porkbun", PriceMicros: 9_730_000, Currency: "USD",
		ContactID: contact.ID, Contact: "Alice Acme"}, plan.Domain)

	for _, c := range []struct {
		transfer ImportTransfer
		code     string
		location string
	}{
		{ImportTransfer{PriceMicros: 1_000_000, Currency: "USD"}, CodeConflict, "/transfer/price_micros"},
		{ImportTransfer{Currency: "USD"}, CodeInvalidConfiguration, "/transfer/price_micros"},
		{ImportTransfer{PriceMicros: 9_730_000, Currency: "USD", ContactID: "bobs-contact"}, CodeInvalidConfiguration, "/transfer/contact_id"},
		{ImportTransfer{PriceMicros: 9_730_000, Currency: "USD", Registrar: "gandi"}, CodeInvalidConfiguration, "/transfer/registrar"},
	} {
		_, err := e.Import(ctx, ImportRequest{Payload: p, Owner: "alice", Transfer: &c.transfer})
		require.Error(t, err, "%+v", c.transfer)
		require.Equal(t, c.code, err.(*Error).Code, "%v", err)
		require.Equal(t, c.location, err.(*Error).Location, "%v", err)
	}
	taken, err := st.NamespaceTaken(ctx, "acme")
	require.NoError(t, err)
	require.False(t, taken, "a refused confirmation stores nothing")

	plan, err = e.Import(ctx, ImportRequest{Payload: p, Owner: "alice", Transfer: &ImportTransfer{PriceMicros: 9_730_000, Currency: "USD"}})
	require.NoError(t, err)
	require.True(t, plan.Domain.Confirmed)
	d, err := st.GetDeployment(ctx, plan.Deployment)
	require.NoError(t, err)
	refs := e.storedRefs(d)
	require.Contains(t, refs, importTransferPointer)
	raw, err := e.reveal(ctx, d.Namespace, importInstances[importPointer], refs[importPointer])
	require.NoError(t, err)
	require.NotContains(t, string(raw), "right-code-123", "the auth code is kept once, apart from the pointers")
	raw, err = e.reveal(ctx, d.Namespace, importInstances[importTransferPointer], refs[importTransferPointer])
	require.NoError(t, err)
	var kept importTransfer
	require.NoError(t, json.Unmarshal(raw, &kept))
	require.Equal(t, importTransfer{Domain: "acme.test", AuthCode: "right-code-123", Registrar: "porkbun", ContactID: contact.ID,
		PriceMicros: 9_730_000, Currency: "USD"}, kept)
	transferRef := refs[importTransferPointer]

	// The registrar does not answer the transfer: the build warns and keeps the code.
	srv.FailCall("domain/transfer", 1, 503)
	log, err := runBuild(t, e, st, plan.Build)
	require.NoError(t, err, log)
	require.Contains(t, log, "the next build tries again (the import keeps the auth code for it)")
	require.NotContains(t, log, "right-code-123")
	d, err = st.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	require.Contains(t, e.storedRefs(d), importTransferPointer)
	require.NotContains(t, e.storedRefs(d), importPointer)
	rec, err := st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainTransferring, rec.State)
	require.Contains(t, rec.Message, "the import keeps the auth code for it")
	require.Zero(t, srv.Charged())

	b, err := e.Resume(ctx, d.ID)
	require.NoError(t, err)
	log, err = runBuild(t, e, st, b.ID)
	require.NoError(t, err, log)
	require.Contains(t, log, "registrar porkbun took the transfer of acme.test (pending)")
	require.Contains(t, log, "the import's auth code is deleted from the secret resource")
	require.NotContains(t, log, "right-code-123")
	rec, err = st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, store.DomainRegistered, rec.Mode)
	require.Equal(t, "pending", rec.State)
	require.Equal(t, "porkbun", rec.Registrar)
	require.Equal(t, contact.ID, rec.ContactID)
	require.Equal(t, int64(973), srv.Charged(), "the registry took the auth code and charged one transfer")
	d, err = st.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	require.NotContains(t, e.storedRefs(d), importTransferPointer)
	_, err = e.reveal(ctx, d.Namespace, importInstances[importTransferPointer], transferRef)
	require.Error(t, err, "the secret resource forgot the auth code")

	// A later build asks for no transfer again.
	b, err = e.Resume(ctx, d.ID)
	require.NoError(t, err)
	log, err = runBuild(t, e, st, b.ID)
	require.NoError(t, err, log)
	require.NotContains(t, log, "transferring")
	require.Equal(t, int64(973), srv.Charged())
}

// A transfer the registrar refuses (a wrong auth code) leaves the domain transfer_failed
// with the registrar's reason, and the auth code is deleted; no event, domain record or
// audit row holds it. An import without the confirmation asks for no transfer: the build
// says the domain is to be delegated.
func TestImportTransferRefusedIsTransferFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := porkbuntest.Start(porkbuntest.Options{PendingFor: time.Minute})
	t.Cleanup(srv.Close)
	srv.External("acme.test", "right-code-123", time.Now().AddDate(0, 6, 0))
	srv.External("other.test", "other-code-456", time.Now().AddDate(0, 6, 0))
	e, st, _ := newTransferEngine(t, srv)

	plan, err := e.Import(ctx, ImportRequest{Payload: transferPayload("acme", "acme.test", "wrong-code-789"), Owner: "alice",
		Transfer: &ImportTransfer{PriceMicros: 9_730_000, Currency: "USD"}})
	require.NoError(t, err)
	log, err := runBuild(t, e, st, plan.Build)
	require.NoError(t, err, log)
	require.Contains(t, log, "the transfer of acme.test to porkbun is refused")
	require.Contains(t, log, "auth code")
	require.NotContains(t, log, "wrong-code-789")
	rec, err := st.GetDomain(ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, DomainTransferFailed, rec.State)
	require.Contains(t, rec.Message, "refused the auth code")
	require.NotContains(t, fmt.Sprintf("%+v", rec), "wrong-code-789")
	d, err := st.GetDeployment(ctx, plan.Deployment)
	require.NoError(t, err)
	require.NotContains(t, e.storedRefs(d), importTransferPointer, "a refused transfer's auth code is deleted")
	require.Zero(t, srv.Charged())
	events, err := st.AuditEvents(ctx, 0, 1000)
	require.NoError(t, err)
	require.NotContains(t, fmt.Sprintf("%+v", events), "wrong-code-789")
	evs, err := st.DomainEvents(ctx, "acme.test", 10)
	require.NoError(t, err)
	require.NotContains(t, fmt.Sprintf("%+v", evs), "wrong-code-789")

	// A transfer_failed domain fails no later build.
	r := &run{e: e, d: d}
	require.NoError(t, r.domainStep(ctx, "acme.test", contract.DNSResult{Zone: "acme.test", Nameservers: []string{"ns1.provider.test"}}))

	plan, err = e.Import(ctx, ImportRequest{Payload: transferPayload("other", "other.test", "other-code-456"), Owner: "alice"})
	require.NoError(t, err)
	require.False(t, plan.Domain.Confirmed)
	log, err = runBuild(t, e, st, plan.Build)
	require.NoError(t, err, log)
	require.Contains(t, log, "the transfer of other.test to porkbun was not confirmed with the import")
	require.NotContains(t, log, "transferring")
	_, err = st.GetDomain(ctx, "other.test")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A registrar's words that quote the auth code lose it.
func TestWithoutAuthCode(t *testing.T) {
	t.Parallel()
	require.Equal(t, "code [auth code] is wrong", withoutAuthCode("code s3cret-Code is wrong", " s3cret-Code\n"))
	require.Equal(t, "nothing to hide", withoutAuthCode("nothing to hide", ""))
}

// A destroy deletes the auth code a transfer that got no answer kept.
func TestDestroyDeletesTheImportsAuthCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := porkbuntest.Start(porkbuntest.Options{PendingFor: time.Minute})
	t.Cleanup(srv.Close)
	srv.External("acme.test", "right-code-123", time.Now().AddDate(0, 6, 0))
	e, st, _ := newTransferEngine(t, srv)
	plan, err := e.Import(ctx, ImportRequest{Payload: transferPayload("acme", "acme.test", "right-code-123"), Owner: "alice",
		Transfer: &ImportTransfer{PriceMicros: 9_730_000, Currency: "USD"}})
	require.NoError(t, err)
	srv.FailCall("domain/transfer", 1, 503)
	log, err := runBuild(t, e, st, plan.Build)
	require.NoError(t, err, log)
	d, err := st.GetDeployment(ctx, plan.Deployment)
	require.NoError(t, err)
	ref := e.storedRefs(d)[importTransferPointer]
	require.NotEmpty(t, ref)
	b, err := e.Destroy(ctx, d.ID)
	require.NoError(t, err)
	log, err = runBuild(t, e, st, b.ID)
	require.NoError(t, err, log)
	_, err = e.reveal(ctx, d.Namespace, importInstances[importTransferPointer], ref)
	require.Error(t, err, "the destroyed deployment's auth code is gone")
	require.Zero(t, srv.Charged())
}
