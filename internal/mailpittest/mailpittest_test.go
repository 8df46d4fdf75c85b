package mailpittest

import (
	"context"
	"errors"
	"net/smtp"
	"net/textproto"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A message sent with the account mailpit was started with is read back through its
// API; another password is refused.
func TestStartSendRead(t *testing.T) {
	s, stop, err := Start(t.TempDir(), Options{Users: map[string]string{"app": "app-password"}})
	require.NoError(t, err)
	defer stop()

	auth := smtp.PlainAuth("", "app", "wrong", "127.0.0.1")
	err = smtp.SendMail(s.SMTPAddr, auth, "noreply@acme.test", []string{"alice@people.test"}, []byte("Subject: refused\r\n\r\nx\r\n"))
	var te *textproto.Error
	require.True(t, errors.As(err, &te), "%v", err)
	require.Equal(t, 535, te.Code)

	auth = smtp.PlainAuth("", "app", "app-password", "127.0.0.1")
	msg := "From: Acme <noreply@acme.test>\r\nTo: alice@people.test\r\nSubject: Welcome alice\r\n\r\nYour link: https://acme.test/invite/abc\r\n"
	require.NoError(t, smtp.SendMail(s.SMTPAddr, auth, "noreply@acme.test", []string{"alice@people.test"}, []byte(msg)))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := s.WaitFor(ctx, "to:alice@people.test")
	require.NoError(t, err)
	require.Equal(t, "Welcome alice", m.Subject)
	require.Equal(t, "noreply@acme.test", m.From.Address)
	text, err := s.Text(ctx, m.ID)
	require.NoError(t, err)
	require.Contains(t, text, "https://acme.test/invite/abc")
	raw, err := s.Raw(ctx, m.ID)
	require.NoError(t, err)
	require.Contains(t, string(raw), "Subject: Welcome alice")
	rp, err := s.ReturnPath(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, "noreply@acme.test", rp)
	ms, err := s.Search(ctx, "subject:refused")
	require.NoError(t, err)
	require.Empty(t, ms)

	require.NoError(t, s.DeleteAll(ctx))
	ms, err = s.Messages(ctx)
	require.NoError(t, err)
	require.Empty(t, ms)
}

// With no accounts, mailpit takes mail from anyone, with or without SMTP AUTH.
func TestStartWithoutAccounts(t *testing.T) {
	s, stop, err := Start(t.TempDir(), Options{})
	require.NoError(t, err)
	defer stop()
	require.NoError(t, smtp.SendMail(s.SMTPAddr, nil, "noreply@acme.test", []string{"bob@people.test"}, []byte("From: noreply@acme.test\r\nTo: bob@people.test\r\nSubject: open\r\n\r\nx\r\n")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := s.WaitFor(ctx, "to:bob@people.test")
	require.NoError(t, err)
	require.Equal(t, "open", m.Subject)
}
