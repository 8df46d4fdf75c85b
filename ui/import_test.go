package ui_test

import (
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

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/migration"
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
