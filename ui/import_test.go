package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

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
	"github.com/fedhost/fedhost/ui"
)

// setupImport is setup with this host's migration keys, and a string sealed to them.
func setupImport(t *testing.T, withCatalog bool) (*bundle, string) {
	t.Helper()
	keys, err := migration.LoadKeys(t.TempDir())
	require.NoError(t, err)
	var b *bundle
	if withCatalog {
		m, cat := minifluxCatalog(t)
		b = setupWith(t, func(o *deploy.Options, d *ui.Deps) { o.Plugins, o.Catalog, d.Migration = m, cat, keys })
	} else {
		b = setupWith(t, func(_ *deploy.Options, d *ui.Deps) { d.Migration = keys })
	}
	now := time.Now().UTC()
	s, err := migration.Seal(migration.Payload{ID: strings.Repeat("ab", 16), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Source:          migration.Source{URL: "https://old.example/", ConfirmToken: strings.Repeat("c", 32)},
		Deployment:      migration.Deployment{ID: "old-id", Name: "Old news", Namespace: "oldnews"},
		CatalogRevision: "r1", Versions: map[string]string{}, Config: json.RawMessage(`{"domain":"news.example.org","apps":{}}`),
		Directory: &migration.Directory{Users: []migration.User{{Name: "alice"}, {Name: "bob"}},
			Groups: []migration.Group{{Name: "readers", Members: []string{"alice"}}}}}, keys.Recipient())
	require.NoError(t, err)
	return b, s
}

func TestImportRefused(t *testing.T) {
	b, s := setupImport(t, false)
	alice := b.as(t, "alice")
	_, body := alice.get(t, "/deployments")
	require.Contains(t, body, `href="/deployments/import"`)
	_, body = alice.get(t, "/deployments/import")
	require.Contains(t, body, `autocomplete="off"`)

	edited := s[:len(s)-8] + "AAAAAAAA"
	res, body := alice.post(t, "/deployments/import", url.Values{"migration": {edited}, "preview": {"1"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Regexp(t, `aria-invalid="true" aria-describedby="import-migration-error"`, body)
	require.Regexp(t, `id="import-migration-error">[^<]+</p>`, body)
	require.NotContains(t, body, edited[len(migration.Prefix):len(migration.Prefix)+40], "a refused string is in the page")
	ds, err := b.st.ListDeployments(t.Context(), b.users["alice"].ID)
	require.NoError(t, err)
	require.Empty(t, ds, "a refused import stored a deployment")
}

func TestImportPreview(t *testing.T) {
	b, s := setupImport(t, true)
	alice := b.as(t, "alice")
	res, body := alice.post(t, "/deployments/import", url.Values{"migration": {s}, "preview": {"1"}, "namespace": {"newnews"}})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	require.Contains(t, body, "Import Old news")
	require.Contains(t, body, "2 users and 1 group")
	require.Contains(t, body, `<code>newnews</code>`)
	require.Contains(t, body, `name="migration" value="`+s+`"`)
	ds, err := b.st.ListDeployments(t.Context(), b.users["alice"].ID)
	require.NoError(t, err)
	require.Empty(t, ds, "a preview stored a deployment")

	// The Import button posts the string again, and no "preview".
	hidden := regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`).FindAllStringSubmatch(body, -1)
	names := []string{}
	for _, m := range hidden {
		names = append(names, m[1])
	}
	// The first csrf is the log-out form's.
	require.Equal(t, []string{"csrf", "csrf", "migration", "name", "namespace"}, names)
}

// TestImportScreenshots saves PNGs of the Import page, a refused string and a preview
// into FEDHOST_UI_SHOTS: for looking at them, not for checking them.
func TestImportScreenshots(t *testing.T) {
	dir := os.Getenv("FEDHOST_UI_SHOTS")
	if dir == "" {
		t.Skip("set FEDHOST_UI_SHOTS=/tmp/ui-shots to save screenshots of the Import page (needs chromium)")
	}
	exe, err := exec.LookPath("chromium")
	require.NoError(t, err, "install the Debian package chromium")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	b, s := setupImport(t, true)
	tab, shot := shooter(t, b, exe, dir)
	save := func(name string) {
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}
	shot("import", "/deployments/import", 1280)
	require.NoError(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.CSS(`#import-migration`), s[:len(s)-8]+"AAAAAAAA"),
		chromedp.Click(chromedp.CSS(`form.narrow button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#import-migration-error`))))
	save("import-refused")
	require.NoError(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.CSS(`#import-migration`), s),
		chromedp.SetValue(chromedp.CSS(`#import-namespace`), "newnews"),
		chromedp.Click(chromedp.CSS(`form.narrow button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`table`))))
	save("import-preview")
}

// setupTransferImport is setup with the real porkbun registrar plugin against a
// Porkbun-shaped server that holds news.example.org elsewhere, the embedded secret
// provider, a queue whose builds never run, and a string bringing the domain's auth code.
func setupTransferImport(t *testing.T) (*bundle, string) {
	t.Helper()
	ctx := context.Background()
	srv := porkbuntest.Start(porkbuntest.Options{})
	t.Cleanup(srv.Close)
	srv.Price("org", "9.73", "10.81", "9.73")
	srv.External("news.example.org", "auth-code-of-news", time.Now().AddDate(0, 6, 0))
	dir, keysDir := t.TempDir(), t.TempDir()
	lock := plugins.Lock{}
	for name, pkg := range map[string]string{"fedhost-registrar-porkbun": "../plugins/registrars/porkbun", "fedhost-resource-embedded": "../plugins/resources/embedded"} {
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(dir))
	key, secret := filepath.Join(keysDir, "key"), filepath.Join(keysDir, "secret")
	require.NoError(t, os.WriteFile(key, []byte(srv.APIKey), 0o600))
	require.NoError(t, os.WriteFile(secret, []byte(srv.SecretKey), 0o600))
	porkbun, _ := json.Marshal(map[string]any{"api_key_file": key, "secret_api_key_file": secret, "base_url": srv.URL, "retries": 0, "timeout_seconds": 2})
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir(), Settings: func(desc sdk.Description) (json.RawMessage, bool) {
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
	keys, err := migration.LoadKeys(t.TempDir())
	require.NoError(t, err)
	b := setupWith(t, func(o *deploy.Options, d *ui.Deps) {
		o.Plugins, o.Catalog, d.Migration = m, cat, keys
		o.Environment = []config.Resource{{Type: contract.Secret, Provider: "embedded"}}
	})
	q, err := queue.New(b.st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	b.engine.SetQueue(q)
	_, err = b.engine.RecordRevision(ctx)
	require.NoError(t, err)
	now := time.Now().UTC()
	s, err := migration.Seal(migration.Payload{ID: strings.Repeat("ab", 16), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Source:          migration.Source{URL: "https://old.example/", ConfirmToken: strings.Repeat("c", 32)},
		Deployment:      migration.Deployment{ID: "old-id", Name: "Old news", Namespace: "oldnews"},
		CatalogRevision: "r1", Versions: map[string]string{}, Config: json.RawMessage(`{"domain":"news.example.org","apps":{}}`),
		Domain: migration.Domain{Name: "news.example.org", Registered: true, AuthCode: "auth-code-of-news"}}, keys.Recipient())
	require.NoError(t, err)
	return b, s
}

// The preview quotes the domain's transfer (registrar, price, the holder chosen among the
// operator's contacts) with an unticked box; the import with the box ticked confirms
// that quote: the deployment keeps the auth code for its first build's transfer.
func TestImportTransferCheckbox(t *testing.T) {
	ctx := context.Background()
	b, s := setupTransferImport(t)
	alice := b.as(t, "alice")
	var contacts []store.Contact
	for _, name := range []string{"Alice Acme", "Acme Hostmaster"} {
		c, err := b.engine.SaveContact(ctx, b.users["alice"].ID, store.Contact{Name: name, Email: "hostmaster@news.example.org", Phone: "+4930123456",
			Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"})
		require.NoError(t, err)
		contacts = append(contacts, c)
	}
	res, body := alice.post(t, "/deployments/import", url.Values{"migration": {s}, "preview": {"1"}})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "can be transferred to porkbun with the auth code the string brings for 9.73 USD, held by Alice Acme.")
	require.Contains(t, body, `<input type="checkbox" id="import-transfer" name="transfer" value="1" aria-describedby="import-transfer-help">`)
	require.Contains(t, body, `<label for="import-transfer">Transfer news.example.org to porkbun for 9.73 USD</label>`)
	require.Contains(t, body, `<input type="hidden" name="transfer_price_micros" value="9730000">`)
	require.Contains(t, body, `<input type="hidden" name="transfer_currency" value="USD">`)
	require.Contains(t, body, `<option value="`+contacts[0].ID+`" selected>Alice Acme (hostmaster@news.example.org)</option>`)
	require.Contains(t, body, `<option value="`+contacts[1].ID+`">Acme Hostmaster`)
	require.NotContains(t, body, "auth-code-of-news")

	// A ticked box at a price the registrar does not quote is refused, nothing stored.
	form := url.Values{"migration": {s}, "transfer": {"1"}, "transfer_registrar": {"porkbun"}, "transfer_price_micros": {"1000000"},
		"transfer_currency": {"USD"}, "transfer_contact": {contacts[1].ID}}
	res, body = alice.post(t, "/deployments/import", form)
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "quotes the transfer of news.example.org at 9.73 USD now")
	ds, err := b.st.ListDeployments(ctx, b.users["alice"].ID)
	require.NoError(t, err)
	require.Empty(t, ds)

	form.Set("transfer_price_micros", "9730000")
	res, body = alice.post(t, "/deployments/import", form)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, body)
	ds, err = b.st.ListDeployments(ctx, b.users["alice"].ID)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	d, err := b.st.GetDeployment(ctx, ds[0].ID)
	require.NoError(t, err)
	var refs map[string]string
	require.NoError(t, json.Unmarshal([]byte(d.SecretRefs), &refs))
	require.Contains(t, refs, "/migration-transfer", "the confirmed transfer's auth code waits for the first build")
}
