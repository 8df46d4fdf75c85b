package directory_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/mailpittest"
	"github.com/fedhost/fedhost/sdk/contract"
)

// mailpitAccount is mailpit on loopback with one account, as an smtp result gives it.
func mailpitAccount(t testing.TB) (*mailpittest.Server, contract.SMTPResult) {
	t.Helper()
	s, stop, err := mailpittest.Start(t.TempDir(), mailpittest.Options{Users: map[string]string{"acme.mail": "the account's password"}})
	require.NoError(t, err)
	t.Cleanup(stop)
	host, p, err := net.SplitHostPort(s.SMTPAddr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	return s, contract.SMTPResult{Host: host, Port: port, User: "acme.mail", From: "noreply@acme.test", TLS: "none"}
}

// The mail is plain text From the account's address, names the domain and the expiry
// and holds the link whole; a refusal names the step and the code, never the password
// or the link.
func TestSendLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, acct := mailpitAccount(t)
	expires := time.Date(2026, 12, 9, 3, 4, 0, 0, time.UTC)
	url := "https://fedhost.acme.test/set-password#" + strings.Repeat("A1_-", 10) + "xyz"
	m := directory.LinkMail{To: "carol@example.net", URL: url, Purpose: store.LinkInvitation, Expires: expires}
	require.NoError(t, directory.SendLink(ctx, acct, []byte("the account's password"), m))
	msg, err := s.WaitFor(ctx, "to:carol@example.net")
	require.NoError(t, err)
	require.Equal(t, "noreply@acme.test", msg.From.Address)
	require.Equal(t, "Your account at acme.test", msg.Subject)
	text, err := s.Text(ctx, msg.ID)
	require.NoError(t, err)
	require.Contains(t, text, url)
	require.Contains(t, text, "Wednesday 9 December 2026, 03:04 UTC")
	raw, err := s.Raw(ctx, msg.ID)
	require.NoError(t, err)
	require.Contains(t, string(raw), "Content-Type: text/plain; charset=utf-8")

	m.Purpose = store.LinkReset
	err = directory.SendLink(ctx, acct, []byte("a wrong password"), m)
	require.Error(t, err)
	require.Contains(t, err.Error(), "AUTH")
	require.NotContains(t, err.Error(), "wrong password")
	require.NotContains(t, err.Error(), url)

	bad := acct
	bad.TLS = "ssl"
	require.ErrorContains(t, directory.SendLink(ctx, bad, nil, m), "none of none, starttls or tls")
	bad = acct
	bad.From = "not an address"
	require.ErrorContains(t, directory.SendLink(ctx, bad, nil, m), "From address")
	m.To = "carol@example.net\r\nBcc: mallory@example.net"
	err = directory.SendLink(ctx, acct, []byte("the account's password"), m)
	require.ErrorContains(t, err, "e-mail address")
	require.NotContains(t, err.Error(), "mallory")
}

// BenchmarkSendLink mails one link to mailpit per iteration: a connection, AUTH PLAIN,
// one message.
func BenchmarkSendLink(b *testing.B) {
	ctx := context.Background()
	_, acct := mailpitAccount(b)
	m := directory.LinkMail{To: "carol@example.net", URL: "https://fedhost.acme.test/set-password#" + strings.Repeat("x", 43), Purpose: store.LinkReset, Expires: time.Now().Add(time.Hour)}
	for b.Loop() {
		if err := directory.SendLink(ctx, acct, []byte("the account's password"), m); err != nil {
			b.Fatal(err)
		}
	}
}

// An account that says starttls gets its password and the link over TLS only: mailpit
// here requires STARTTLS, with a certificate of a CA made for the test that stands in
// for the system's roots (SSL_CERT_FILE, read once per process: so not parallel, and
// before the parallel tests).
func TestSendLinkOverSTARTTLS(t *testing.T) {
	ctx := context.Background()
	s, stop, err := mailpittest.Start(t.TempDir(), mailpittest.Options{Users: map[string]string{"acme.mail": "the account's password"}, STARTTLS: true})
	require.NoError(t, err)
	t.Cleanup(stop)
	t.Setenv("SSL_CERT_FILE", s.CAFile)
	host, p, err := net.SplitHostPort(s.SMTPAddr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	acct := contract.SMTPResult{Host: host, Port: port, User: "acme.mail", From: "noreply@acme.test", TLS: "starttls"}
	m := directory.LinkMail{To: "dave@example.net", URL: "https://fedhost.acme.test/set-password#" + strings.Repeat("y", 43), Purpose: store.LinkReset, Expires: time.Now().Add(time.Hour)}
	require.NoError(t, directory.SendLink(ctx, acct, []byte("the account's password"), m))
	msg, err := s.WaitFor(ctx, "to:dave@example.net")
	require.NoError(t, err)
	require.Equal(t, "Choose a new password at acme.test", msg.Subject)

	acct.TLS = "none"
	err = directory.SendLink(ctx, acct, []byte("the account's password"), m)
	require.Error(t, err, "mailpit requires STARTTLS")
	require.Contains(t, err.Error(), "refused")
	require.NotContains(t, err.Error(), "the account's password")

	// A server whose certificate the roots do not trust (another CA): the error says so.
	other, stopOther, err := mailpittest.Start(t.TempDir(), mailpittest.Options{Users: map[string]string{"acme.mail": "the account's password"}, STARTTLS: true})
	require.NoError(t, err)
	t.Cleanup(stopOther)
	_, p, err = net.SplitHostPort(other.SMTPAddr)
	require.NoError(t, err)
	acct.Port, err = strconv.Atoi(p)
	require.NoError(t, err)
	acct.TLS = "starttls"
	err = directory.SendLink(ctx, acct, []byte("the account's password"), m)
	require.Error(t, err)
	require.Contains(t, err.Error(), "the mail server's TLS certificate was not accepted at STARTTLS")
	require.Contains(t, err.Error(), "unknown authority")
	require.NotContains(t, err.Error(), "the account's password")
}
