package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/internal/porkbuntest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// pluginBinary is this package's plugin, built by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.Main(m, "fedhost-registrar-porkbun", &pluginBinary)
}

// settingsFor writes the server's key pair to files and returns settings that use them.
func settingsFor(t testing.TB, s *porkbuntest.Server, extra map[string]any) json.RawMessage {
	t.Helper()
	dir := t.TempDir()
	key, secret := filepath.Join(dir, "api-key"), filepath.Join(dir, "secret-api-key")
	require.NoError(t, os.WriteFile(key, []byte(s.APIKey+"\n"), 0o600))
	require.NoError(t, os.WriteFile(secret, []byte(s.SecretKey+"\n"), 0o600))
	m := map[string]any{"api_key_file": key, "secret_api_key_file": secret, "base_url": s.URL}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// setup starts a Porkbun-shaped server and a driver configured for it, in process.
func setup(t testing.TB, opts porkbuntest.Options, extra map[string]any) (*driver, *porkbuntest.Server) {
	t.Helper()
	s := porkbuntest.Start(opts)
	t.Cleanup(s.Close)
	d := &driver{}
	require.NoError(t, d.Configure(context.Background(), settingsFor(t, s, extra)))
	d.api.backoff = 50 * time.Millisecond
	return d, s
}

func TestConformance(t *testing.T) {
	s := porkbuntest.Start(porkbuntest.Options{PendingFor: 2 * time.Second, CheckLimit: 6, CheckWindow: 3 * time.Second})
	defer s.Close()
	s.Taken("taken.com")
	s.Pending("slow-registry.test")
	s.Owned("renewable.com", time.Now().AddDate(0, -10, 0))
	s.External("incoming.dev", "Xq7-auth-Code!", time.Now().AddDate(0, 5, 0))
	conformance.Registrar(t, pluginBinary, conformance.RegistrarCase{
		Settings:         settingsFor(t, s, nil),
		Secrets:          []string{s.APIKey, s.SecretKey, "Xq7-auth-Code!"},
		Available:        "fedhost-conformance.test",
		Taken:            "taken.com",
		Pending:          "slow-registry.test",
		Renew:            "renewable.com",
		Transfer:         "incoming.dev",
		TransferAuthCode: "Xq7-auth-Code!",
		Nameservers:      []string{"ns1.provider.example", "ns2.provider.example"},
		Contact: registrar.Contact{Name: "Ada Operator", Email: "ada@example.org", Phone: "+4930123456",
			Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"},
	})
}

// The registrar's 5xx, after the retries of a read, is unavailable, so the host fails the
// step unavailable and tries again on the next build.
func TestServerErrorIsUnavailable(t *testing.T) {
	t.Parallel()
	d, s := setup(t, porkbuntest.Options{}, map[string]any{"retries": 2})
	s.Fail(3, 502)
	_, err := d.Check(context.Background(), "example.com")
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "502")

	// Once the server is back, the same call answers.
	a, err := d.Check(context.Background(), "example.com")
	require.NoError(t, err)
	require.True(t, a.Available)
	require.EqualValues(t, 11_080_000, a.PriceMicros)
}

// Through the plugin, as the host calls it: a registrar failing with 5xx reaches the
// host as unavailable, not as an internal error.
func TestServerErrorIsUnavailableThroughThePlugin(t *testing.T) {
	t.Parallel()
	s := porkbuntest.Start(porkbuntest.Options{})
	defer s.Close()
	ctx := context.Background()
	p, err := client.Start(ctx, pluginBinary)
	require.NoError(t, err)
	defer p.Kill()
	require.NoError(t, p.Configure(ctx, settingsFor(t, s, map[string]any{"retries": 0})))
	s.Fail(1, 500)
	_, err = p.Registrar().Snapshot(ctx)
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "%v", err)
	_, err = p.Registrar().Snapshot(ctx)
	require.NoError(t, err)
}

// A read that fails on 5xx once is sent again and answers.
func TestServerErrorIsRetried(t *testing.T) {
	t.Parallel()
	d, s := setup(t, porkbuntest.Options{}, nil)
	s.Fail(2, 503)
	_, err := d.Check(context.Background(), "example.com")
	require.NoError(t, err)
}

// A registrar that does not answer within timeout_seconds is unavailable too.
func TestTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	d, s := setup(t, porkbuntest.Options{}, map[string]any{"timeout_seconds": 1, "retries": 0})
	s.Delay(1, 3*time.Second)
	start := time.Now()
	_, err := d.Snapshot(context.Background())
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "%v", err)
	require.Less(t, time.Since(start), 2500*time.Millisecond)
}

// Calls over the rate limit are answered 429 and sent again after a pause: all pass.
func TestRateLimitIsAnsweredWithBackoff(t *testing.T) {
	t.Parallel()
	d, _ := setup(t, porkbuntest.Options{CheckLimit: 2, CheckWindow: 500 * time.Millisecond}, map[string]any{"retries": 6})
	for range 5 {
		_, err := d.Check(context.Background(), "example.com")
		require.NoError(t, err)
	}
}

// With no retries left, a rate limit is unavailable, not a refusal of the operator's input.
func TestRateLimitWithoutRetriesIsUnavailable(t *testing.T) {
	t.Parallel()
	d, _ := setup(t, porkbuntest.Options{CheckLimit: 1, CheckWindow: time.Minute}, map[string]any{"retries": 0})
	_, err := d.Check(context.Background(), "example.com")
	require.NoError(t, err)
	_, err = d.Check(context.Background(), "example.com")
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "%v", err)
}

// A registration whose answer is lost is sent again with the same idempotency key, and
// Porkbun's replay of the first answer means one charge.
func TestLostAnswerChargesOnce(t *testing.T) {
	t.Parallel()
	d, s := setup(t, porkbuntest.Options{}, nil)
	ctx := context.Background()
	a, err := d.Check(ctx, "lost-answer.test")
	require.NoError(t, err)
	// create's answer is lost on the way back; the driver sends it again with the key.
	req := registrar.RegisterRequest{Domain: "lost-answer.test", Years: 1, PriceMicros: a.PriceMicros, Currency: a.Currency, IdempotencyKey: "confirmation-17"}
	d.api.http.Transport = &loseCreate{s: s}
	dom, err := d.Register(ctx, req)
	require.NoError(t, err)
	require.Equal(t, registrar.StatusActive, dom.Status)
	require.Equal(t, 1, s.Creates())
	require.EqualValues(t, 973, s.Charged())

	// The host's own retry of the confirmation charges nothing either.
	_, err = d.Register(ctx, req)
	require.NoError(t, err)
	require.Equal(t, 1, s.Creates())
}

// A price that changed between the quote and the confirmation is refused naming
// price_micros, and nothing is charged.
func TestChangedPriceIsRefused(t *testing.T) {
	t.Parallel()
	d, s := setup(t, porkbuntest.Options{}, nil)
	ctx := context.Background()
	a, err := d.Check(ctx, "pricey.test")
	require.NoError(t, err)
	s.Price("test", "14.20", "14.20", "14.20")
	_, err = d.Register(ctx, registrar.RegisterRequest{Domain: "pricey.test", Years: 1, PriceMicros: a.PriceMicros, Currency: a.Currency})
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "price_micros", sdk.FieldOf(err))
	require.Contains(t, err.Error(), "14.20")
	require.Zero(t, s.Charged())
	require.Zero(t, s.Creates())
}

// A key pair Porkbun refuses names the key file setting and shows no key.
func TestRefusedKeysNameTheSetting(t *testing.T) {
	t.Parallel()
	s := porkbuntest.Start(porkbuntest.Options{})
	defer s.Close()
	dir := t.TempDir()
	key, secret := filepath.Join(dir, "k"), filepath.Join(dir, "s")
	require.NoError(t, os.WriteFile(key, []byte("pk1_wrongwrongwrong"), 0o600))
	require.NoError(t, os.WriteFile(secret, []byte("sk1_wrongwrongwrong"), 0o600))
	raw, _ := json.Marshal(map[string]any{"api_key_file": key, "secret_api_key_file": secret, "base_url": s.URL})
	d := &driver{}
	require.NoError(t, d.Configure(context.Background(), raw))
	_, err := d.Check(context.Background(), "example.com")
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "settings/api_key_file", sdk.FieldOf(err))
	require.NotContains(t, err.Error(), "wrongwrong")
}

func TestSettingsAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	require.NoError(t, os.WriteFile(key, []byte("pk1_abc"), 0o600))
	two := filepath.Join(dir, "two")
	require.NoError(t, os.WriteFile(two, []byte("pk1_abc\nsk1_def\n"), 0o600))
	for _, c := range []struct {
		settings map[string]any
		field    string
	}{
		{map[string]any{"api_key_file": "relative", "secret_api_key_file": key}, "settings/api_key_file"},
		{map[string]any{"api_key_file": key, "secret_api_key_file": filepath.Join(dir, "missing")}, "settings/secret_api_key_file"},
		{map[string]any{"api_key_file": two, "secret_api_key_file": key}, "settings/api_key_file"},
		{map[string]any{"api_key_file": key, "secret_api_key_file": key, "base_url": "ftp://x"}, "settings/base_url"},
		{map[string]any{"api_key_file": key, "secret_api_key_file": key, "timeout_seconds": 0.5}, "settings"},
	} {
		raw, _ := json.Marshal(c.settings)
		err := (&driver{}).Configure(context.Background(), raw)
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%s: %v", raw, err)
		require.Equal(t, c.field, sdk.FieldOf(err), "%s: %v", raw, err)
		require.NotContains(t, err.Error(), "sk1_def")
	}
}

func TestPriceMicros(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"9.73": 9_730_000, "11": 11_000_000, "0.5": 500_000, "1234.123456": 1_234_123_456} {
		got, err := priceMicros(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1.00", "1.-5", "1.1234567", "abc", "1e3", "+5"} {
		_, err := priceMicros(in)
		require.Error(t, err, in)
	}
	require.Equal(t, "9.73", formatMicros(9_730_000))
	require.Equal(t, "10.00", formatMicros(10_000_000))
	require.Equal(t, "0.005", formatMicros(5_000))
}

// loseCreate passes every request on, and has the server lose the answer of the first
// domain/create, so the driver's retry meets Porkbun's idempotency replay.
type loseCreate struct {
	s    *porkbuntest.Server
	done bool
}

func (l *loseCreate) RoundTrip(r *http.Request) (*http.Response, error) {
	if !l.done && strings.Contains(r.URL.Path, "/domain/create/") {
		l.done = true
		l.s.LoseAnswer(1, 502)
	}
	return http.DefaultTransport.RoundTrip(r)
}
