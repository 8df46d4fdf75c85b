package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/plugins/registrars/inwx/internal/inwxtest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// binary is the plugin built once for the whole package.
var binary string

func TestMain(m *testing.M) { plugintest.Main(m, "fedhost-registrar-inwx", &binary) }

const (
	user     = "fedhost-api"
	password = "s3cret-Pa55"
)

// bundle is a DomRobot test server and the plugin configured for it.
type bundle struct {
	srv *inwxtest.Server
	reg *registrar.Client
	p   *client.Plugin
	ctx context.Context
}

// writeCredentials writes the credential files and returns their settings.
func writeCredentials(t *testing.T, u, pw string) (string, string) {
	dir := t.TempDir()
	uf, pf := filepath.Join(dir, "user"), filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(uf, []byte(u+"\n"), 0o600))
	require.NoError(t, os.WriteFile(pf, []byte(pw+"\n"), 0o600))
	return uf, pf
}

// setup starts a server and the plugin; extra settings override the defaults.
func setup(t *testing.T, extra map[string]any) bundle {
	t.Helper()
	srv := inwxtest.Start(user, password)
	t.Cleanup(srv.Close)
	uf, pf := writeCredentials(t, user, password)
	s := map[string]any{"base_url": srv.URL(), "username_file": uf, "password_file": pf,
		"timeout_seconds": 2, "pending_wait_seconds": 5, "poll_milliseconds": 20}
	for k, v := range extra {
		s[k] = v
	}
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	p, err := client.Start(ctx, binary)
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, raw))
	return bundle{srv: srv, reg: p.Registrar(), p: p, ctx: ctx}
}

var ada = registrar.Contact{Name: "Ada Lovelace", Email: "ada@example.com", Phone: "+4930123456",
	Street: "Unter den Linden 1", City: "Berlin", PostalCode: "10117", Country: "DE"}

func TestDomainLife(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	owner, err := b.reg.PutContact(b.ctx, ada)
	require.NoError(t, err)
	require.NotEmpty(t, owner.ID)

	a, err := b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err)
	require.True(t, a.Available)
	require.Equal(t, int64(9_990_000), a.PriceMicros, "9.99 read exactly")
	require.Equal(t, "EUR", a.Currency)

	b.srv.PendingPolls(3)
	d, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", Years: 1, OwnerContact: owner.ID,
		Nameservers: []string{"ns1.provider.example", "ns2.provider.example"}})
	require.NoError(t, err)
	require.Equal(t, "active", d.Status, "the 1001 answer is followed until the registry ends it")
	require.GreaterOrEqual(t, b.srv.Count("domain.info"), 3)
	require.Equal(t, []string{"ns1.provider.example", "ns2.provider.example"}, d.Nameservers)
	require.WithinDuration(t, time.Now().AddDate(1, 0, 0), d.Expires, time.Minute)
	b.srv.PendingPolls(0)

	a, err = b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err)
	require.False(t, a.Available)
	require.Contains(t, a.Reason, "taken")

	d, err = b.reg.SetNameservers(b.ctx, "acme.test", []string{"ns1.other.example", "ns2.other.example"})
	require.NoError(t, err)
	require.Equal(t, []string{"ns1.other.example", "ns2.other.example"}, d.Nameservers)

	d, err = b.reg.SetLock(b.ctx, "acme.test", true)
	require.NoError(t, err)
	require.True(t, d.Locked)
	d, err = b.reg.SetLock(b.ctx, "acme.test", false)
	require.NoError(t, err)
	require.False(t, d.Locked, "transferLock 0 reaches INWX")

	code, err := b.reg.AuthCode(b.ctx, "acme.test")
	require.NoError(t, err)
	held, _ := b.srv.Domain("acme.test")
	require.Equal(t, held.AuthCode, code)

	before := held.Expires
	d, err = b.reg.Renew(b.ctx, "acme.test", 2)
	require.NoError(t, err)
	require.Equal(t, before.AddDate(2, 0, 0), d.Expires, "renewed from the expiry INWX had")

	b.srv.Sign("acme.test", 2)
	snap, err := b.reg.Snapshot(b.ctx)
	require.NoError(t, err)
	require.Len(t, snap, 1)
	require.Equal(t, "acme.test", snap[0].Name)
	require.Equal(t, d.Expires, snap[0].Expires)
	require.True(t, snap[0].DNSSEC, "dnssec.info's key count")
	d, err = b.reg.RemoveDNSSEC(b.ctx, "acme.test")
	require.NoError(t, err)
	require.False(t, d.DNSSEC)
	held, _ = b.srv.Domain("acme.test")
	require.Zero(t, held.DNSKeys, "dnssec.deleteall removed the keys")

	got, err := b.reg.GetContact(b.ctx, owner.ID)
	require.NoError(t, err)
	require.Equal(t, owner, got, "the phone reads back as E.164")
	owner.City = "Potsdam"
	_, err = b.reg.PutContact(b.ctx, owner)
	require.NoError(t, err)
	all, err := b.reg.ListContacts(b.ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, "Potsdam", all[0].City)
	err = b.reg.DeleteContact(b.ctx, owner.ID)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "a contact holding a domain stays: %v", err)

	require.Equal(t, 1, b.srv.Count("account.login"), "one session serves every call")
}

func TestTransferIn(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.srv.AddForeign("moved.test", "Xy9-auth")

	_, err := b.reg.Transfer(b.ctx, registrar.TransferRequest{Domain: "moved.test", AuthCode: "Bad-Code-123"})
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "auth_code", sdk.FieldOf(err))
	require.NotContains(t, err.Error(), "Bad-Code-123", "the code sent is not echoed")

	b.srv.PendingPolls(2)
	d, err := b.reg.Transfer(b.ctx, registrar.TransferRequest{Domain: "moved.test", AuthCode: "Xy9-auth"})
	require.NoError(t, err)
	require.Equal(t, "active", d.Status)
}

func TestPendingLongerThanTheWait(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"pending_wait_seconds": 0})
	owner, err := b.reg.PutContact(b.ctx, ada)
	require.NoError(t, err)
	b.srv.PendingPolls(1000)
	d, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "slow.test", OwnerContact: owner.ID})
	require.NoError(t, err)
	require.Equal(t, "pending", d.Status, "a registration the registry keeps pending is returned as pending")
	require.Equal(t, 1, b.srv.Count("domain.create"))
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	owner, err := b.reg.PutContact(b.ctx, ada)
	require.NoError(t, err)
	b.srv.Take("taken.test")

	for _, c := range []struct {
		name  string
		call  func() error
		code  sdk.Code
		field string
	}{
		{"bad name", func() error { _, err := b.reg.Check(b.ctx, "no_such..name"); return err }, sdk.CodeInvalid, "domain"},
		{"taken", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "taken.test", OwnerContact: owner.ID})
			return err
		}, sdk.CodeInvalid, "domain"},
		{"TLD not offered", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.invalid", OwnerContact: owner.ID})
			return err
		}, sdk.CodeInvalid, "domain"},
		{"no owner", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test"})
			return err
		}, sdk.CodeInvalid, "owner_contact"},
		{"unknown owner", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", OwnerContact: "999999"})
			return err
		}, sdk.CodeNotFound, ""},
		{"years", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", Years: 11, OwnerContact: owner.ID})
			return err
		}, sdk.CodeInvalid, "years"},
		{"nameserver", func() error { _, err := b.reg.SetNameservers(b.ctx, "acme.test", []string{"ns1..x"}); return err }, sdk.CodeInvalid, "nameservers/0"},
		{"not in account", func() error { _, err := b.reg.SetLock(b.ctx, "other.test", true); return err }, sdk.CodeNotFound, ""},
		{"phone", func() error { c := ada; c.Phone = "030 123456"; _, err := b.reg.PutContact(b.ctx, c); return err }, sdk.CodeInvalid, "phone"},
		{"country", func() error { c := ada; c.Country = "Germany"; _, err := b.reg.PutContact(b.ctx, c); return err }, sdk.CodeInvalid, "country"},
	} {
		err := c.call()
		require.Equal(t, c.code, sdk.CodeOf(err), "%s: %v", c.name, err)
		if c.field != "" {
			require.Equal(t, c.field, sdk.FieldOf(err), c.name)
		}
	}
	require.Equal(t, 1, b.srv.Count("domain.create"), "a taken domain and an unknown TLD are refused at the check: only the unknown owner reached domain.create")
}

func TestLogin(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err)
	b.srv.EndSessions()
	_, err = b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err, "an ended session is started again")
	require.Equal(t, 2, b.srv.Count("account.login"))

	uf, pf := writeCredentials(t, user, "not-the-password")
	raw, _ := json.Marshal(map[string]any{"base_url": b.srv.URL(), "username_file": uf, "password_file": pf})
	require.NoError(t, b.p.Configure(b.ctx, raw))
	_, err = b.reg.Check(b.ctx, "acme.test")
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "settings/password_file", sdk.FieldOf(err))
	require.NotContains(t, err.Error(), "not-the-password")

	err = b.p.Configure(b.ctx, json.RawMessage(fmt.Sprintf(`{"username_file":%q,"password_file":"/nonexistent/pw"}`, uf)))
	require.Equal(t, "settings/password_file", sdk.FieldOf(err))
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"timeout_seconds": 1})
	_, err := b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err)

	b.srv.FailNext(1, http.StatusBadGateway)
	_, err = b.reg.Check(b.ctx, "acme.test")
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "5xx: %v", err)

	b.srv.Delay(1500 * time.Millisecond)
	_, err = b.reg.Check(b.ctx, "acme.test")
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "timeout: %v", err)
	b.srv.Delay(0)

	b.srv.RateLimit(2, time.Second)
	for range 4 {
		_, err = b.reg.Check(b.ctx, "acme.test")
		require.NoError(t, err, "a rate limit is waited out")
	}
	b.srv.RateLimit(1, time.Hour) // a check is two calls: domain.check and domain.getPrices
	_, err = b.reg.Check(b.ctx, "acme.test")
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "a rate limit that holds: %v", err)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	srv := inwxtest.Start(user, password)
	t.Cleanup(srv.Close)
	srv.Take("taken.test")
	srv.Pending("slow-registry.test", 3)
	srv.AddDomain("renewable.test", time.Now().AddDate(0, 0, 20))
	srv.AddForeign("incoming.example", "Xq7-auth-Code!")
	uf, pf := writeCredentials(t, user, password)
	raw, err := json.Marshal(map[string]any{"base_url": srv.URL(), "username_file": uf, "password_file": pf,
		"timeout_seconds": 5, "pending_wait_seconds": 0, "poll_milliseconds": 20})
	require.NoError(t, err)
	conformance.Registrar(t, binary, conformance.RegistrarCase{
		Settings:         raw,
		Secrets:          []string{password, "Xq7-auth-Code!"},
		Available:        "fedhost-conformance.test",
		Taken:            "taken.test",
		Pending:          "slow-registry.test",
		Renew:            "renewable.test",
		Transfer:         "incoming.example",
		TransferAuthCode: "Xq7-auth-Code!",
		Nameservers:      []string{"ns1.provider.example", "ns2.provider.example"},
		Contact:          ada,
		FollowInterval:   20 * time.Millisecond,
		FollowTimeout:    10 * time.Second,
	})
	require.Equal(t, 1, srv.Count("domain.create")-1, "the repeated register and the refused price created nothing (one create each for Available and Pending)")
}

// A confirmed price that is not INWX's now is refused before domain.create.
func TestPriceChanged(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	owner, err := b.reg.PutContact(b.ctx, ada)
	require.NoError(t, err)
	a, err := b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err)
	require.Equal(t, int64(9_990_000), a.RenewalPriceMicros)
	require.Equal(t, int64(7_500_000), a.TransferPriceMicros)
	b.srv.SetPrice("test", "11.99")
	_, err = b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", OwnerContact: owner.ID, PriceMicros: a.PriceMicros, Currency: a.Currency})
	require.Equal(t, "price_micros", sdk.FieldOf(err), "%v", err)
	require.Contains(t, err.Error(), "11.99")
	_, err = b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", OwnerContact: owner.ID, PriceMicros: 11_990_000, Currency: "USD"})
	require.Equal(t, "currency", sdk.FieldOf(err), "%v", err)
	require.Equal(t, 0, b.srv.Count("domain.create"), "nothing ordered")
	d, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", OwnerContact: owner.ID, PriceMicros: 11_990_000, Currency: "EUR"})
	require.NoError(t, err)
	require.Equal(t, registrar.StatusActive, d.Status)
}

func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
