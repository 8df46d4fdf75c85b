package cli_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
)

// withStdin runs f with the process's stdin reading s: the import reads the string
// there. Not parallel: os.Stdin is the process's.
func withStdin(t *testing.T, s string, f func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "migration.txt")
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	file, err := os.Open(path)
	require.NoError(t, err)
	defer file.Close()
	old := os.Stdin
	os.Stdin = file
	defer func() { os.Stdin = old }()
	f()
}

// `fedhost deployments import` sends the string it reads on stdin, and prints the API's
// refusal with its reason; an empty stdin is refused before any call.
func TestImportReadsTheStringOnStdin(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: t.TempDir(), DataDir: t.TempDir()})
	require.NoError(t, err)
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail})
	keys, err := migration.LoadKeys(t.TempDir())
	require.NoError(t, err)
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: deploy.New(deploy.Options{Store: st, Plugins: m}), Store: st, Auth: accounts, Audit: trail, Migration: keys})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	u, _, err := accounts.CreateUser(ctx, "alice", false)
	require.NoError(t, err)
	token, _, err := accounts.NewToken(ctx, u.ID, "cli", time.Hour)
	require.NoError(t, err)
	flags := []string{"deployments", "--server", "http://" + ln.Addr().String(), "--token", token, "import", "--preview"}

	now := time.Now()
	s, err := migration.Seal(migration.Payload{
		ID: strings.Repeat("ab", 16), CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour),
		Source:     migration.Source{URL: "https://old.example", ConfirmToken: strings.Repeat("t", 40)},
		Deployment: migration.Deployment{Namespace: "acme"}, CatalogRevision: "r1",
		Config: json.RawMessage(`{}`),
	}, keys.Recipient())
	require.NoError(t, err)
	var stdout, stderr string
	var code int
	withStdin(t, s+"\n", func() { stdout, stderr, code = runCLI(flags...) })
	require.NotZero(t, code, stdout)
	require.Contains(t, stderr, "invalid_configuration at /migration")
	require.Contains(t, stderr, "expired at")
	require.NotContains(t, stderr, s[len(migration.Prefix):len(migration.Prefix)+40])

	withStdin(t, "  \n", func() { stdout, stderr, code = runCLI(flags...) })
	require.NotZero(t, code, stdout)
	require.Contains(t, stderr, "give the migration string on stdin")
}

// The preview prints the domain's transfer quote and the flags that confirm it;
// --transfer sends the confirmation ("transfer" in the body) and the answer says the
// first build transfers the domain; a confirmation's flag without --transfer is refused
// before any call.
func TestImportTransferFlags(t *testing.T) {
	var got []api.ImportRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.ImportRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		got = append(got, req)
		plan := deploy.ImportPlan{Migration: "m1", Source: "https://old.example", Name: "acme", Namespace: "acme",
			Domain: deploy.ImportedDomain{Name: "acme.example", Action: "transfer", Registrar: "porkbun", PriceMicros: 9_730_000, Currency: "USD",
				ContactID: "c1", Contact: "Alice Acme", Confirmed: req.Transfer != nil}}
		w.Header().Set("Content-Type", "application/json")
		if !req.Preview {
			plan.Deployment, plan.Build = "d1", "b1"
			w.WriteHeader(http.StatusAccepted)
		}
		_ = json.NewEncoder(w).Encode(plan)
	}))
	t.Cleanup(srv.Close)
	flags := []string{"deployments", "--server", srv.URL, "--token", "t", "import"}
	var stdout, stderr string
	var code int
	withStdin(t, "fedhost-migration-1:abc\n", func() { stdout, stderr, code = runCLI(append(flags, "--preview")...) })
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "domain acme.example: can be transferred to registrar porkbun for 9.73 USD, held by Alice Acme (contact c1)")
	require.Contains(t, stdout, "fedhost deployments import --transfer --price 9730000 --currency USD --contact c1 < FILE")
	require.Nil(t, got[0].Transfer)

	withStdin(t, "fedhost-migration-1:abc\n", func() {
		stdout, stderr, code = runCLI(append(flags, "--transfer", "--price", "9730000", "--currency", "USD", "--contact", "c1")...)
	})
	require.Zero(t, code, stderr)
	require.Equal(t, &api.ImportTransfer{ContactID: "c1", PriceMicros: 9_730_000, Currency: "USD"}, got[1].Transfer)
	require.Contains(t, stdout, "domain acme.example: transferred to registrar porkbun for 9.73 USD, held by Alice Acme (contact c1), by the first build")
	require.Contains(t, stdout, "deployment d1, build b1 queued")

	withStdin(t, "fedhost-migration-1:abc\n", func() { stdout, stderr, code = runCLI(append(flags, "--price", "9730000")...) })
	require.NotZero(t, code, stdout)
	require.Contains(t, stderr, "--price confirms the domain's transfer: give --transfer too")
	require.Len(t, got, 2, "refused before any call")
}
