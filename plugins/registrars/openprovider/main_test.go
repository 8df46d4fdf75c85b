package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/plugins/registrars/openprovider/internal/optest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// binary is the plugin built once for the whole package.
var binary string

func TestMain(m *testing.M) { plugintest.Main(m, "fedhost-registrar-openprovider", &binary) }

const (
	user     = "fedhost-reseller"
	password = "0p-s3cret-Pa55"
)

type bundle struct {
	srv *optest.Server
	reg *registrar.Client
	p   *client.Plugin
	ctx context.Context
}

func writeCredentials(t *testing.T, u, pw string) (string, string) {
	dir := t.TempDir()
	uf, pf := filepath.Join(dir, "user"), filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(uf, []byte(u+"\n"), 0o600))
	require.NoError(t, os.WriteFile(pf, []byte(pw+"\n"), 0o600))
	return uf, pf
}

func settingsFor(t *testing.T, srv *optest.Server, extra map[string]any) json.RawMessage {
	uf, pf := writeCredentials(t, user, password)
	s := map[string]any{"base_url": srv.URL(), "username_file": uf, "password_file": pf,
		"timeout_seconds": 2, "pending_wait_seconds": 5, "poll_milliseconds": 20}
	for k, v := range extra {
		s[k] = v
	}
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	return raw
}

func setup(t *testing.T, extra map[string]any) bundle {
	t.Helper()
	srv := optest.Start(user, password)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	p, err := client.Start(ctx, binary)
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, settingsFor(t, srv, extra)))
	return bundle{srv: srv, reg: p.Registrar(), p: p, ctx: ctx}
}

var ada = registrar.Contact{Name: "Ada King Lovelace", Organization: "Analytical Engines", Email: "ada@example.com",
	Phone: "+4930123456", Street: "Unter den Linden 1", City: "Berlin", PostalCode: "10117", Country: "DE"}

func TestConformance(t *testing.T) {
	t.Parallel()
	srv := optest.Start(user, password)
	t.Cleanup(srv.Close)
	srv.Take("taken.test")
	srv.Pending("slow-registry.test", 3)
	srv.AddDomain("renewable.test", time.Now().AddDate(0, 0, 20))
	srv.AddForeign("incoming.example", "Xq7-auth-Code!")
	conformance.Registrar(t, binary, conformance.RegistrarCase{
		Settings:         settingsFor(t, srv, map[string]any{"pending_wait_seconds": 0}),
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
	require.Equal(t, 2, srv.Count("POST /v1beta/domains"), "one order each for Available and Pending: the repeat and the refused price ordered nothing")
}

func TestDomainLife(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	owner, err := b.reg.PutContact(b.ctx, ada)
	require.NoError(t, err)
	got, err := b.reg.GetContact(b.ctx, owner.ID)
	require.NoError(t, err)
	require.Equal(t, owner, got, "name, street and phone are split for the API and joined again")

	a, err := b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err)
	require.True(t, a.Available)
	require.Equal(t, int64(8_490_000), a.PriceMicros, "the reseller price, read exactly")
	require.Equal(t, "EUR", a.Currency)
	require.Equal(t, int64(5_250_000), a.TransferPriceMicros)

	b.srv.Pending("acme.test", 3)
	d, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", OwnerContact: owner.ID,
		Nameservers: []string{"ns1.provider.example", "ns2.provider.example"}, PriceMicros: a.PriceMicros, Currency: a.Currency})
	require.NoError(t, err)
	require.Equal(t, registrar.StatusActive, d.Status, "REQ is followed until the domain is ACT")
	require.Equal(t, []string{"ns1.provider.example", "ns2.provider.example"}, d.Nameservers)
	require.GreaterOrEqual(t, b.srv.Count("GET /v1beta/domains/{id}"), 3)

	d, err = b.reg.SetLock(b.ctx, "acme.test", true)
	require.NoError(t, err)
	require.True(t, d.Locked)
	code, err := b.reg.AuthCode(b.ctx, "acme.test")
	require.NoError(t, err)
	held, _ := b.srv.Domain("acme.test")
	require.Equal(t, held.AuthCode, code)

	d, err = b.reg.Renew(b.ctx, "acme.test", 1)
	require.NoError(t, err)
	require.Equal(t, held.Expires.AddDate(1, 0, 0), d.Expires)

	d, err = b.reg.SetNameservers(b.ctx, "acme.test", []string{"ns1.other.example", "ns2.other.example"})
	require.NoError(t, err)
	require.Equal(t, []string{"ns1.other.example", "ns2.other.example"}, d.Nameservers, "the new nameservers replace the old")

	b.srv.Sign("acme.test", 2)
	snap, err := b.reg.Snapshot(b.ctx)
	require.NoError(t, err)
	require.Len(t, snap, 1)
	require.Equal(t, d.Expires, snap[0].Expires)
	require.True(t, snap[0].DNSSEC)
	d, err = b.reg.RemoveDNSSEC(b.ctx, "acme.test")
	require.NoError(t, err)
	require.False(t, d.DNSSEC)
	held, _ = b.srv.Domain("acme.test")
	require.Zero(t, held.DNSKeys)

	b.srv.Premium("gold.test")
	a, err = b.reg.Check(b.ctx, "gold.test")
	require.NoError(t, err)
	require.False(t, a.Available, "a premium name is not offered at the standard quote")
	require.Contains(t, a.Reason, "premium")
	require.Equal(t, 1, b.srv.Count("POST /v1beta/auth/login"), "one token serves every call")
}

func TestToken(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err)
	b.srv.ExpireTokens()
	_, err = b.reg.Check(b.ctx, "acme.test")
	require.NoError(t, err, "a token the API refuses is renewed")
	require.Equal(t, 2, b.srv.Count("POST /v1beta/auth/login"))

	uf, pf := writeCredentials(t, user, "not-the-password")
	raw, _ := json.Marshal(map[string]any{"base_url": b.srv.URL(), "username_file": uf, "password_file": pf})
	require.NoError(t, b.p.Configure(b.ctx, raw))
	_, err = b.reg.Check(b.ctx, "acme.test")
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "settings/password_file", sdk.FieldOf(err))
	require.NotContains(t, err.Error(), "not-the-password")
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	owner, err := b.reg.PutContact(b.ctx, ada)
	require.NoError(t, err)
	b.srv.Take("taken.test")
	b.srv.AddForeign("moved.test", "Right-Code-1")
	for _, c := range []struct {
		name  string
		call  func() error
		code  sdk.Code
		field string
	}{
		{"taken", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "taken.test", OwnerContact: owner.ID})
			return err
		}, sdk.CodeInvalid, "domain"},
		{"extension not offered", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.invalid", OwnerContact: owner.ID})
			return err
		}, sdk.CodeInvalid, "domain"},
		{"malformed handle", func() error {
			_, err := b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", OwnerContact: "no handle!"})
			return err
		}, sdk.CodeInvalid, "owner_contact"},
		{"wrong auth code", func() error {
			_, err := b.reg.Transfer(b.ctx, registrar.TransferRequest{Domain: "moved.test", AuthCode: "Wrong-Code-9", OwnerContact: owner.ID})
			return err
		}, sdk.CodeInvalid, "auth_code"},
		{"not held", func() error { _, err := b.reg.SetLock(b.ctx, "other.test", true); return err }, sdk.CodeNotFound, ""},
		{"one-word name", func() error { c := ada; c.Name = "Ada"; _, err := b.reg.PutContact(b.ctx, c); return err }, sdk.CodeInvalid, "name"},
		{"phone", func() error { c := ada; c.Phone = "+49"; _, err := b.reg.PutContact(b.ctx, c); return err }, sdk.CodeInvalid, "phone"},
	} {
		err := c.call()
		require.Equal(t, c.code, sdk.CodeOf(err), "%s: %v", c.name, err)
		if c.field != "" {
			require.Equal(t, c.field, sdk.FieldOf(err), c.name)
		}
		require.NotContains(t, err.Error(), "Wrong-Code-9")
	}
	b.srv.SetPrice("test", "9.49")
	_, err = b.reg.Register(b.ctx, registrar.RegisterRequest{Domain: "acme.test", OwnerContact: owner.ID, PriceMicros: 8_490_000, Currency: "EUR"})
	require.Equal(t, "price_micros", sdk.FieldOf(err), "%v", err)
	require.Contains(t, err.Error(), "9.49")
	require.Equal(t, 0, b.srv.Count("POST /v1beta/domains"), "every refusal came before an order: the check, the handle, the changed price")
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"timeout_seconds": 1})
	_, err := b.reg.Snapshot(b.ctx)
	require.NoError(t, err)

	b.srv.FailNext(1, http.StatusServiceUnavailable)
	_, err = b.reg.Snapshot(b.ctx)
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "5xx: %v", err)

	b.srv.Delay(1500 * time.Millisecond)
	_, err = b.reg.Snapshot(b.ctx)
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "timeout: %v", err)
	b.srv.Delay(0)

	b.srv.RateLimit(2, time.Second)
	for range 4 {
		_, err = b.reg.Snapshot(b.ctx)
		require.NoError(t, err, "a rate limit is waited out")
	}
	b.srv.RateLimit(1, time.Hour)
	_, err = b.reg.Snapshot(b.ctx)
	require.NoError(t, err)
	_, err = b.reg.Snapshot(b.ctx)
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "a rate limit that holds: %v", err)
}
