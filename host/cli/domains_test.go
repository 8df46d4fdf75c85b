package cli_test

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
)

// realAPI serves the real API on loopback, on a fresh store, and returns its URL, the
// store and an API token of operator alice with her id.
func realAPI(t *testing.T) (string, *store.Store, string, string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: t.TempDir(), DataDir: t.TempDir()})
	require.NoError(t, err)
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail})
	engine := deploy.New(deploy.Options{Store: st, Plugins: m})
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	u, _, err := accounts.CreateUser(ctx, "alice", false)
	require.NoError(t, err)
	token, _, err := accounts.NewToken(ctx, u.ID, "cli", time.Hour)
	require.NoError(t, err)
	return "http://" + ln.Addr().String(), st, token, u.ID
}

// The domains commands talk to the real API: a contact refused names its field, one
// added is listed, a deployment's domain is shown with its events and costs, and a
// registrar the host does not run is named as such.
func TestDomainsCommandsAgainstTheAPI(t *testing.T) {
	t.Parallel()
	url, st, token, alice := realAPI(t)
	flags := []string{"--server", url, "--token", token}

	_, stderr, code := runCLI(append([]string{"domains", "contacts", "add", "--name", "Alice", "--email", "alice@acme.test", "--phone", "0301234",
		"--street", "Hauptstr. 1", "--city", "Berlin", "--postal-code", "10115", "--country", "DE"}, flags...)...)
	require.NotZero(t, code)
	require.Contains(t, stderr, "/phone")
	out, stderr, code := runCLI(append([]string{"domains", "contacts", "add", "--name", "Alice", "--email", "alice@acme.test", "--phone", "+4930123456",
		"--street", "Hauptstr. 1", "--city", "Berlin", "--postal-code", "10115", "--country", "DE"}, flags...)...)
	require.Zero(t, code, stderr)
	id := string(bytes.TrimSpace([]byte(out)))
	out, _, code = runCLI(append([]string{"domains", "contacts"}, flags...)...)
	require.Zero(t, code)
	require.Contains(t, out, id)
	require.Contains(t, out, "+4930123456")

	ctx := context.Background()
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Owner: alice, Domain: "acme.test", State: deploy.StateActive, Config: "{}"})
	require.NoError(t, err)
	exp := time.Date(2027, 5, 31, 0, 0, 0, 0, time.UTC)
	require.NoError(t, st.PutDomain(ctx, store.Domain{Name: "acme.test", DeploymentID: d.ID, Owner: alice, Mode: store.DomainRegistered, Registrar: "porkbun",
		State: "active", ExpiresAt: &exp, Locked: true, Nameservers: "ns1.provider.test ns2.provider.test"}))
	_, err = st.RecordDomainEvent(ctx, store.DomainEvent{Domain: "acme.test", DeploymentID: d.ID, Owner: alice, Registrar: "porkbun",
		Kind: store.DomainEventRegistration, CostMicros: 9_730_000, Currency: "USD"})
	require.NoError(t, err)
	out, stderr, code = runCLI(append([]string{"domains", "show", d.ID}, flags...)...)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "2027-05-31")
	require.Contains(t, out, "ns1.provider.test ns2.provider.test")
	require.Contains(t, out, "registration 9.73 USD")

	out, stderr, code = runCLI(append([]string{"domains", "renewal", d.ID, "manual"}, flags...)...)
	require.Zero(t, code, stderr)
	require.Regexp(t, `renewal\s+manual`, out)
	_, stderr, code = runCLI(append([]string{"domains", "renewal", d.ID, "sometimes"}, flags...)...)
	require.NotZero(t, code)
	require.Contains(t, stderr, "/renewal")
	_, stderr, code = runCLI(append([]string{"domains", "check", "acme.test", "--registrar", "porkbun"}, flags...)...)
	require.NotZero(t, code)
	require.Contains(t, stderr, "no such registrar is installed")
	_, stderr, code = runCLI(append([]string{"domains", "lock", d.ID}, flags...)...)
	require.NotZero(t, code)
	require.Contains(t, stderr, "porkbun")
}
