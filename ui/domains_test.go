package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// domainSites gives alice a registered domain with its registration and renewal, and
// bob a delegated one still awaiting its delegation, with app periods for both.
func domainSites(t *testing.T, b *bundle) (alice, bob store.Deployment) {
	t.Helper()
	ctx := context.Background()
	alice, bob = b.create(t, "alice", "acme"), b.create(t, "bob", "bobs")
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	exp := month.AddDate(1, 0, 20)
	require.NoError(t, b.st.PutDomain(ctx, store.Domain{Name: "acme.example", DeploymentID: alice.ID, Owner: b.users["alice"].ID, Mode: store.DomainRegistered,
		Registrar: "porkbun", State: "active", ExpiresAt: &exp, Locked: true, Nameservers: "ns1.provider.example ns2.provider.example", PriceMicros: 9_730_000, Currency: "USD"}))
	require.NoError(t, b.st.PutDomain(ctx, store.Domain{Name: "bobs.example", DeploymentID: bob.ID, Owner: b.users["bob"].ID, Mode: store.DomainDelegated,
		State: "awaiting_delegation", Nameservers: "ns1.provider.example ns2.provider.example",
		Message: "set the nameservers of bobs.example at your registrar to ns1.provider.example, ns2.provider.example"}))
	for _, ev := range []store.DomainEvent{
		{Time: month.Add(2 * time.Hour), Kind: store.DomainEventRegistration, CostMicros: 9_730_000, Currency: "USD", Detail: "1 year"},
		{Time: month.Add(3 * time.Hour), Kind: store.DomainEventRenewal, CostMicros: 10_810_000, Currency: "USD", Detail: "1 year(s), asked for"},
	} {
		ev.Domain, ev.DeploymentID, ev.Owner, ev.Registrar = "acme.example", alice.ID, b.users["alice"].ID, "porkbun"
		_, err := b.st.RecordDomainEvent(ctx, ev)
		require.NoError(t, err)
	}
	require.NoError(t, b.st.RecordAppPeriods(ctx, alice.ID, b.users["alice"].ID, map[string]string{"miniflux": "instance postgresql"}, month.Add(time.Hour)))
	require.NoError(t, b.st.RecordAppPeriods(ctx, bob.ID, b.users["bob"].ID, map[string]string{"hello": "instance"}, month.Add(time.Hour)))
	return alice, bob
}

// The Domains and Usage pages show an operator their own domains, events, costs and app
// periods, and nothing of another operator's; a superuser sees everyone's.
func TestDomainsAndUsagePagesShowTheOperatorsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	domainSites(t, b)

	res, body := b.as(t, "alice").get(t, "/domains")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "acme.example")
	require.Contains(t, body, "ns1.provider.example")
	require.Contains(t, body, "10.81 USD")
	require.NotContains(t, body, "bobs.example")
	_, body = b.as(t, "bob").get(t, "/domains")
	require.Contains(t, body, "set the nameservers of bobs.example")
	require.NotContains(t, body, "acme.example")
	_, body = b.as(t, "root").get(t, "/domains")
	require.Contains(t, body, "acme.example")
	require.Contains(t, body, "bobs.example")

	res, body = b.as(t, "alice").get(t, "/usage")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "20.54 USD", "the month's total of registration and renewal")
	require.Contains(t, body, "miniflux")
	require.NotContains(t, body, "hello")
	_, body = b.as(t, "root").get(t, "/usage")
	require.Contains(t, body, "hello")
	require.Contains(t, body, ">bob<")
	res, _ = b.as(t, "alice").get(t, "/usage?from=yesterday")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
}

// TestDomainScreenshots saves PNGs of the Domains and Usage pages into FEDHOST_UI_SHOTS.
func TestDomainScreenshots(t *testing.T) {
	dir := os.Getenv("FEDHOST_UI_SHOTS")
	if dir == "" {
		t.Skip("set FEDHOST_UI_SHOTS=/tmp/ui-shots to save screenshots of the domain pages (needs chromium)")
	}
	exe, err := exec.LookPath("chromium")
	require.NoError(t, err, "install the Debian package chromium")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	b := setup(t)
	domainSites(t, b)
	_, shot := shooter(t, b, exe, dir)
	shot("domains", "/domains", 1280)
	shot("domains-narrow", "/domains", 420)
	shot("usage", "/usage", 1280)
	fmt.Fprintln(os.Stderr, "screenshots in", dir)
}
