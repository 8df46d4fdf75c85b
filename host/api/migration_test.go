package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/porkbuntest"
	"github.com/fedhost/fedhost/sdk"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

// importBundle is an API with the real Miniflux plugin, the embedded secret provider and
// a migration key; builds are queued and never run.
type importBundle struct {
	*bundle
	keys    *migration.Keys
	plugins *plugins.Manager
	dirs    []string // the store's and the plugins' data, searched for leaks
}

func setupImport(t *testing.T) *importBundle { return setupImportWith(t, nil) }

// setupImportWith is setupImport with the real porkbun registrar plugin against srv,
// when srv is not nil.
func setupImportWith(t *testing.T, srv *porkbuntest.Server) *importBundle {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	lock := plugins.Lock{}
	builds := map[string]string{"fedhost-app-miniflux": "../../plugins/apps/miniflux", "fedhost-resource-embedded": "../../plugins/resources/embedded"}
	var porkbun json.RawMessage
	if srv != nil {
		builds["fedhost-registrar-porkbun"] = "../../plugins/registrars/porkbun"
		keys := t.TempDir()
		key, secret := filepath.Join(keys, "key"), filepath.Join(keys, "secret")
		require.NoError(t, os.WriteFile(key, []byte(srv.APIKey), 0o600))
		require.NoError(t, os.WriteFile(secret, []byte(srv.SecretKey), 0o600))
		porkbun, _ = json.Marshal(map[string]any{"api_key_file": key, "secret_api_key_file": secret, "base_url": srv.URL, "retries": 0, "timeout_seconds": 2})
	}
	for name, pkg := range builds {
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, out)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(dir))
	storeDir, pluginData := t.TempDir(), t.TempDir()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: storeDir})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: pluginData, Settings: func(desc sdk.Description) (json.RawMessage, bool) {
		if desc.Name == "porkbun" {
			return porkbun, true
		}
		return nil, true
	}})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail})
	engine := deploy.New(deploy.Options{Store: st, Plugins: m, Catalog: cat, Audit: trail,
		Environment: []config.Resource{{Type: contract.Secret, Provider: "embedded"}}})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	engine.SetQueue(q)
	_, err = engine.RecordRevision(ctx)
	require.NoError(t, err)
	keys, err := migration.LoadKeys(t.TempDir())
	require.NoError(t, err)
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail, Version: "1.2.3", Migration: keys})
	return &importBundle{bundle: &bundle{app: app, st: st, accounts: accounts, trail: trail}, keys: keys, plugins: m, dirs: []string{storeDir, pluginData}}
}

// payload is a migration of a Miniflux at version, with its data, two users and a group.
func payload(version string) migration.Payload {
	now := time.Now()
	return migration.Payload{
		ID: "0123456789abcdef0123456789abcdef", CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(24 * time.Hour),
		Source:          migration.Source{URL: "https://fedhost.old.example", ConfirmToken: strings.Repeat("c0nf1rm", 6)},
		Deployment:      migration.Deployment{ID: "source-id", Name: "Acme feeds", Namespace: "acme"},
		CatalogRevision: "rev-at-source", Versions: map[string]string{"miniflux": version},
		Config: json.RawMessage(`{"domain":"acme.example","apps":{"miniflux":{"enable":true,"options":{"adminUsername":"ada"}}}}`),
		Apps: map[string]migration.AppData{"miniflux": {Version: version, RepositoryPassword: "restic-repo-pass-value-1",
			Snapshot: "4f6e2a1b", S3: migration.S3{Endpoint: "http://127.0.0.1:9", Bucket: "acme-miniflux-backups",
				AccessKeyID: "READONLYKEYID0001", SecretAccessKey: "read-only-secret-access-key-value"}}},
		Directory: &migration.Directory{
			Users:  []migration.User{{Name: "ada", PasswordHash: "{SSHA}aGFzaC12YWx1ZS1vZi1hZGE="}, {Name: "bob", PasswordHash: "{SSHA}aGFzaC12YWx1ZS1vZi1ib2I="}},
			Groups: []migration.Group{{Name: "readers", Members: []string{"ada", "bob"}}},
		},
		Domain: migration.Domain{Name: "acme.example", Registered: true, AuthCode: "auth-code-value-7Q"},
	}
}

// secretValues are the payload's values that must never be stored or answered in the
// clear.
func secretValues(p migration.Payload) []string {
	return []string{p.Source.ConfirmToken, p.Apps["miniflux"].RepositoryPassword, p.Apps["miniflux"].S3.SecretAccessKey,
		p.Domain.AuthCode, p.Directory.Users[0].PasswordHash}
}

func seal(t *testing.T, p migration.Payload, recipient string) string {
	t.Helper()
	s, err := migration.Seal(p, recipient)
	require.NoError(t, err)
	return s
}

func importBody(t *testing.T, s string, preview bool, namespace string) string {
	t.Helper()
	raw, err := json.Marshal(api.ImportRequest{Migration: s, Preview: preview, Namespace: namespace})
	require.NoError(t, err)
	return string(raw)
}

// assertNoLeak fails when a value is in any file of the store's or the plugins' data.
func (b *importBundle) assertNoLeak(t *testing.T, values ...string) {
	t.Helper()
	for _, dir := range b.dirs {
		require.NoError(t, filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, v := range values {
				require.False(t, bytes.Contains(raw, []byte(v)), "%s holds a secret of the migration string", path)
			}
			return nil
		}))
	}
}

// The recipient is public; an import's preview says what it would make and stores
// nothing; the import creates the caller's deployment, queues its build, and keeps the
// pointers in the secret resource only; the namespace is then taken.
func TestImportPreviewsThenCreatesTheDeployment(t *testing.T) {
	t.Parallel()
	b := setupImport(t)
	ctx := context.Background()
	status, body := b.do(t, client{}, "GET", "/api/v1/migration/recipient", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var r api.Recipient
	require.NoError(t, json.Unmarshal(body, &r))
	require.Equal(t, b.keys.Recipient(), r.Recipient)
	require.True(t, strings.HasPrefix(r.Recipient, "age1pq1"))

	alice := b.user(t, "alice", false)
	p := payload("2.3.5")
	s := seal(t, p, r.Recipient)

	status, body = b.do(t, alice, "POST", "/api/v1/deployments/import", importBody(t, s, true, ""))
	require.Equal(t, http.StatusOK, status, "%s", body)
	var plan deploy.ImportPlan
	require.NoError(t, json.Unmarshal(body, &plan))
	require.Equal(t, []deploy.ImportedApp{{App: "miniflux", From: "2.3.5", To: "2.3.5", Data: true}}, plan.Apps)
	require.Equal(t, 2, plan.Users)
	require.Equal(t, 1, plan.Groups)
	require.Equal(t, deploy.ImportedDomain{Name: "acme.example", Action: "delegate"}, plan.Domain, "no registrar here: the operator delegates")
	require.Equal(t, "acme", plan.Namespace)
	require.Empty(t, plan.Deployment)
	ds, err := b.st.ListDeploymentsPage(ctx, "", "", 100)
	require.NoError(t, err)
	require.Empty(t, ds, "a preview stores nothing")

	status, body = b.do(t, alice, "POST", "/api/v1/deployments/import", importBody(t, s, false, ""))
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	require.NoError(t, json.Unmarshal(body, &plan))
	require.NotEmpty(t, plan.Build)
	for _, v := range append(secretValues(p), s) {
		require.NotContains(t, string(body), v)
	}
	d, err := b.st.GetDeployment(ctx, plan.Deployment)
	require.NoError(t, err)
	require.Equal(t, "acme", d.Namespace)
	require.Equal(t, "Acme feeds", d.Name)
	me, err := b.st.UserByName(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, me.ID, d.Owner)
	builds, err := b.st.ListBuilds(ctx, d.ID, 10)
	require.NoError(t, err)
	require.Len(t, builds, 1)
	require.Contains(t, builds[0].Config, `"adminUsername":"ada"`)

	// The pointers wait in the secret resource (an instance of their own, deleted once used), by a reference among the deployment's.
	d, err = b.st.GetDeployment(ctx, plan.Deployment)
	require.NoError(t, err)
	var refs map[string]string
	require.NoError(t, json.Unmarshal([]byte(d.SecretRefs), &refs))
	require.Contains(t, refs, "/migration")
	pl, ok := b.plugins.Find(sdk.KindResource, "embedded", "")
	require.True(t, ok)
	cl, err := pl.Client()
	require.NoError(t, err)
	raw, err := cl.Resource().Reveal(ctx, d.Namespace, "fedhost-import", refs["/migration"])
	require.NoError(t, err)
	var pending deploy.Pending
	require.NoError(t, json.Unmarshal(raw, &pending))
	require.Equal(t, p.Apps, pending.Apps)
	require.Equal(t, p.Directory, pending.Directory)
	require.Equal(t, p.Domain.AuthCode, pending.Domain.AuthCode)
	require.Equal(t, p.Source.ConfirmToken, pending.ConfirmToken)

	// Audited without the string; nothing of it in the store's or the plugins' files.
	events, err := b.st.AuditEvents(ctx, 0, 1000)
	require.NoError(t, err)
	found := false
	for _, e := range events {
		found = found || e.Action == "deployment.import"
	}
	require.True(t, found, "the import is audited")
	b.assertNoLeak(t, append(secretValues(p), s[len(migration.Prefix):len(migration.Prefix)+64])...)

	status, body = b.do(t, alice, "POST", "/api/v1/deployments/import", importBody(t, s, true, ""))
	require.Equal(t, http.StatusConflict, status, "%s", body)
	require.Contains(t, string(body), "another (")
	status, body = b.do(t, alice, "POST", "/api/v1/deployments/import", importBody(t, s, true, "acme2"))
	require.Equal(t, http.StatusConflict, status, "the domain is taken: %s", body)
	require.Contains(t, string(body), "/domain")
}

// A string that is not for this fedhost, edited, expired, of another format version, or
// naming an app or version this catalog cannot run is refused with its reason at
// /migration, and nothing is stored: no deployment, no secret.
func TestImportRefusesStringsItCannotTake(t *testing.T) {
	t.Parallel()
	b := setupImport(t)
	ctx := context.Background()
	alice := b.user(t, "alice", false)
	other, err := migration.LoadKeys(t.TempDir())
	require.NoError(t, err)
	good := seal(t, payload("2.3.5"), b.keys.Recipient())
	expired := payload("2.3.5")
	expired.CreatedAt, expired.ExpiresAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	unknownApp := payload("2.3.5")
	unknownApp.Versions["nosuchapp"] = "1.0.0"
	edited := []byte(good)
	if edited[len(edited)/2] == 'A' {
		edited[len(edited)/2] = 'B'
	} else {
		edited[len(edited)/2] = 'A'
	}
	cases := []struct {
		name, s, reason string
	}{
		{"another target", seal(t, payload("2.3.5"), other.Recipient()), "does not open with this fedhost's key"},
		{"edited", string(edited), "or edited"},
		{"expired", seal(t, expired, b.keys.Recipient()), "expired at"},
		{"unknown format", "fedhost-migration-2:" + good[len(migration.Prefix):], "format version 2"},
		{"not a string", "hello", "must start with"},
		{"unknown app", seal(t, unknownApp, b.keys.Recipient()), "app nosuchapp 1.0.0"},
		{"a step too large", seal(t, payload("0.9.0"), b.keys.Recipient()), "app miniflux cannot move from version 0.9.0, which the source ran, to 2.3.5"},
		{"a downgrade", seal(t, payload("3.0.0"), b.keys.Recipient()), "app miniflux cannot move from version 3.0.0"},
	}
	for _, c := range cases {
		for _, preview := range []bool{true, false} {
			status, body := b.do(t, alice, "POST", "/api/v1/deployments/import", importBody(t, c.s, preview, ""))
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.name, body)
			var answer struct {
				Error api.Error `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &answer))
			require.Equal(t, "invalid_configuration", answer.Error.Code, c.name)
			require.Equal(t, "/migration", answer.Error.Location, c.name)
			require.Contains(t, answer.Error.Message, c.reason, c.name)
			if len(c.s) > 80 {
				require.NotContains(t, string(body), c.s[20:80], c.name)
			}
		}
	}
	ds, err := b.st.ListDeploymentsPage(ctx, "", "", 100)
	require.NoError(t, err)
	require.Empty(t, ds, "a refused import stores no deployment")
	// The secret provider keeps nothing: its data holds no tenant's secret.
	b.assertNoLeak(t, secretValues(payload("2.3.5"))...)
}

// The preview quotes the domain's transfer at this host's registrar (its transfer price
// and the caller's contact); "transfer" confirms it: a confirmation without a registrar
// here, or at a price the registrar does not quote, is refused before anything is
// stored; the confirmed import keeps the auth code in a secret instance of its own
// (fedhost-import-transfer, reference /migration-transfer), not with the pointers, and
// never in the answer or the store.
func TestImportConfirmsTheDomainsTransfer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	none := setupImport(t)
	alice := none.user(t, "alice", false)
	p := payload("2.3.5")
	body := func(b *importBundle, preview bool, transfer *api.ImportTransfer) string {
		raw, err := json.Marshal(api.ImportRequest{Migration: seal(t, p, b.keys.Recipient()), Preview: preview, Transfer: transfer})
		require.NoError(t, err)
		return string(raw)
	}
	refusal := func(raw []byte) api.Error {
		var answer struct {
			Error api.Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &answer))
		return answer.Error
	}
	status, raw := none.do(t, alice, "POST", "/api/v1/deployments/import", body(none, false, &api.ImportTransfer{PriceMicros: 9_730_000, Currency: "USD"}))
	require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	require.Equal(t, "/transfer", refusal(raw).Location)
	require.Contains(t, refusal(raw).Message, "runs no registrar")

	srv := porkbuntest.Start(porkbuntest.Options{})
	t.Cleanup(srv.Close)
	srv.Price("example", "9.73", "10.81", "9.73")
	srv.External("acme.example", p.Domain.AuthCode, time.Now().AddDate(0, 6, 0))
	b := setupImportWith(t, srv)
	alice = b.user(t, "alice", false)
	status, raw = b.do(t, alice, "POST", "/api/v1/contacts", `{"name":"Alice Acme","email":"alice@acme.example","phone":"+4930123456","street":"Hauptstr. 1","city":"Berlin","postal_code":"10115","country":"DE"}`)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var contact api.Contact
	require.NoError(t, json.Unmarshal(raw, &contact))

	status, raw = b.do(t, alice, "POST", "/api/v1/deployments/import", body(b, true, nil))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var plan deploy.ImportPlan
	require.NoError(t, json.Unmarshal(raw, &plan))
	require.Equal(t, deploy.ImportedDomain{Name: "acme.example", Action: "transfer", Registrar: "porkbun", PriceMicros: 9_730_000, Currency: "USD",
		ContactID: contact.ID, Contact: "Alice Acme"}, plan.Domain)

	status, raw = b.do(t, alice, "POST", "/api/v1/deployments/import", body(b, false, &api.ImportTransfer{PriceMicros: 8_000_000, Currency: "USD"}))
	require.Equal(t, http.StatusConflict, status, "%s", raw)
	require.Equal(t, "/transfer/price_micros", refusal(raw).Location)
	require.Contains(t, refusal(raw).Message, "9.73 USD")
	ds, err := b.st.ListDeploymentsPage(ctx, "", "", 100)
	require.NoError(t, err)
	require.Empty(t, ds, "a refused confirmation stores nothing")

	status, raw = b.do(t, alice, "POST", "/api/v1/deployments/import", body(b, false, &api.ImportTransfer{PriceMicros: 9_730_000, Currency: "USD", ContactID: contact.ID}))
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	require.NotContains(t, string(raw), p.Domain.AuthCode)
	require.NoError(t, json.Unmarshal(raw, &plan))
	require.True(t, plan.Domain.Confirmed)
	d, err := b.st.GetDeployment(ctx, plan.Deployment)
	require.NoError(t, err)
	var refs map[string]string
	require.NoError(t, json.Unmarshal([]byte(d.SecretRefs), &refs))
	require.Contains(t, refs, "/migration-transfer")
	pl, ok := b.plugins.Find(sdk.KindResource, "embedded", "")
	require.True(t, ok)
	cl, err := pl.Client()
	require.NoError(t, err)
	secret, err := cl.Resource().Reveal(ctx, d.Namespace, "fedhost-import-transfer", refs["/migration-transfer"])
	require.NoError(t, err)
	require.Contains(t, string(secret), p.Domain.AuthCode)
	secret, err = cl.Resource().Reveal(ctx, d.Namespace, "fedhost-import", refs["/migration"])
	require.NoError(t, err)
	var pending deploy.Pending
	require.NoError(t, json.Unmarshal(secret, &pending))
	require.Empty(t, pending.Domain.AuthCode, "the auth code is kept once")
	b.assertNoLeak(t, secretValues(p)...)
}
