package main

import (
	"context"
	"encoding/json"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// A message sent with the provisioned account and From arrives at the upstream (mailpit,
// which takes it only with the relay's upstream account), with envelope and header from
// the account's address and every recipient.
func TestMailSentWithTheAccountArrives(t *testing.T) {
	t.Parallel()
	rc, logs := start(t, testSettings(t))
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	require.Equal(t, "acme.mail", a.User)
	require.Equal(t, "noreply@acme.example", a.From)
	require.Equal(t, "127.0.0.1", a.Host)
	require.Equal(t, "none", a.TLS)
	require.Len(t, a.password, 43)

	subject := uniqueSubject("arrives")
	to := []string{"alice@people.test", "bob@people.test"}
	require.NoError(t, send(addr(a), a.User, a.password, submission{envelopeFrom: a.From, headerFrom: a.From, to: to, subject: subject}))
	m := arrived(t, subject)
	require.Equal(t, "noreply@acme.example", m.From.Address)
	require.Len(t, m.To, 2)
	require.Equal(t, "alice@people.test", m.To[0].Address)
	ctx := context.Background()
	rp, err := mailpit.ReturnPath(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, "noreply@acme.example", rp, "the envelope sender is the account's address")
	text, err := mailpit.Text(ctx, m.ID)
	require.NoError(t, err)
	require.Contains(t, text, "Hello from the relay test.")
	waitLog(t, logs, "message relayed")
}

// A wrong password, another account's password and an unknown account are refused at
// AUTH; nothing is sent; the log says a log-in was refused but holds neither the name
// tried nor the password.
func TestWrongPasswordIsRefused(t *testing.T) {
	t.Parallel()
	rc, logs := start(t, testSettings(t))
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	b := provision(t, rc, "acme", "other", spec("hello", "acme.example"))
	wrong := strings.Repeat("x", 43)
	for _, c := range []struct{ user, password string }{
		{a.User, wrong},
		{a.User, b.password},
		{a.User, a.password[:42]},
		{"nobody.mail", a.password},
		{strings.ToUpper(a.User), a.password},
	} {
		err := authenticate(addr(a), c.user, c.password)
		require.Equal(t, 535, replyCode(err), "%s: %v", c.user, err)
	}
	subject := uniqueSubject("wrong-password")
	err := send(addr(a), a.User, wrong, submission{envelopeFrom: a.From, headerFrom: a.From, to: []string{"x@people.test"}, subject: subject})
	require.Equal(t, 535, replyCode(err))
	absent(t, subject)

	// Without AUTH, MAIL is refused.
	c, err := smtp.Dial(addr(a))
	require.NoError(t, err)
	defer c.Close()
	err = c.Mail(a.From)
	require.Equal(t, 530, replyCode(err), "%v", err)

	waitLog(t, logs, "authentication refused")
	text := logs.String()
	for _, secret := range []string{wrong, a.password, b.password, "nobody.mail"} {
		require.NotContains(t, text, secret)
	}
}

// One deployment's account cannot send as another's From: not in the envelope (MAIL
// FROM), not in the From header, not in a Sender header; the relay refuses before the
// upstream sees anything.
func TestAccountCannotSendAsAnothersFrom(t *testing.T) {
	t.Parallel()
	rc, _ := start(t, testSettings(t))
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	b := provision(t, rc, "beta", "mail", spec("noreply", "beta.example"))
	for _, c := range []struct {
		name string
		m    submission
		code int
	}{
		{"envelope", submission{envelopeFrom: b.From, headerFrom: b.From}, 553},
		{"header", submission{envelopeFrom: a.From, headerFrom: b.From}, 550},
		{"sender header", submission{envelopeFrom: a.From, headerFrom: a.From, extraHeaders: "Sender: " + b.From + "\r\n"}, 550},
		{"return-path header", submission{envelopeFrom: a.From, headerFrom: a.From, extraHeaders: "Return-Path: <" + b.From + ">\r\n"}, 550},
		{"two from headers", submission{envelopeFrom: a.From, headerFrom: a.From, extraHeaders: "From: " + b.From + "\r\n"}, 550},
		{"same domain, other local part", submission{envelopeFrom: "ceo@acme.example", headerFrom: "ceo@acme.example"}, 553},
	} {
		c.m.subject = uniqueSubject("spoof")
		c.m.to = []string{"victim@people.test"}
		err := send(addr(a), a.User, a.password, c.m)
		require.Equal(t, c.code, replyCode(err), "%s: %v", c.name, err)
		absent(t, c.m.subject)
	}
	// The address in another case is the account's own.
	subject := uniqueSubject("own")
	require.NoError(t, send(addr(a), a.User, a.password, submission{envelopeFrom: "NoReply@ACME.example", headerFrom: a.From, to: []string{"x@people.test"}, subject: subject}))
	arrived(t, subject)
}

// A domain belongs to the first deployment whose account uses it: another deployment
// asking for it, for a name under it or above it is a conflict; the same deployment may
// use it for several instances.
func TestDomainBelongsToOneDeployment(t *testing.T) {
	t.Parallel()
	rc, _ := start(t, testSettings(t))
	ctx := context.Background()
	provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	provision(t, rc, "acme", "news", spec("news", "lists.acme.example"))
	for _, d := range []string{"acme.example", "lists.acme.example", "x.acme.example", "x.lists.acme.example"} {
		_, err := rc.Provision(ctx, resource.Request{Tenant: "beta", Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", d)})
		require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%s: %v", d, err)
		require.NotContains(t, err.Error(), "acme", "the refusal does not name the other deployment")
	}
	_, err := rc.Provision(ctx, resource.Request{Tenant: "beta", Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", "example.net")})
	require.NoError(t, err)
	// Once acme's accounts are gone, the domain is free.
	for _, inst := range []string{"mail", "news"} {
		require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: inst, Type: contract.SMTP}))
	}
	_, err = rc.Provision(ctx, resource.Request{Tenant: "beta", Instance: "other", Type: contract.SMTP, Spec: spec("noreply", "acme.example")})
	require.NoError(t, err)
}

// A deprovisioned account can send no more, even on a session that logged in before.
func TestDeprovisionEndsTheAccount(t *testing.T) {
	t.Parallel()
	rc, _ := start(t, testSettings(t))
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	c, err := smtp.Dial(addr(a))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Auth(smtp.PlainAuth("", a.User, a.password, "127.0.0.1")))
	require.NoError(t, rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "acme", Instance: "mail", Type: contract.SMTP}))
	require.Equal(t, 535, replyCode(c.Mail(a.From)))
	require.Equal(t, 535, replyCode(authenticate(addr(a), a.User, a.password)))
	st, err := rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", "acme.example")})
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)
}

// Accounts survive a restart of the plugin; a provision given back its password keeps it,
// one without gets a new password and the old one stops working.
func TestAccountsSurviveARestart(t *testing.T) {
	t.Parallel()
	s := testSettings(t)
	dataDir := t.TempDir()
	rc, stop := startIn(t, s, dataDir)
	ctx := context.Background()
	res, err := rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", "acme.example")})
	require.NoError(t, err)
	stop()
	rc, _ = startIn(t, s, dataDir)
	a := decodeAccount(t, provisioned(res))
	require.NoError(t, authenticate(addr(a), a.User, a.password), "after a restart")
	again, err := rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", "acme.example"), Secrets: res.Secrets})
	require.NoError(t, err)
	require.Equal(t, res.Secrets, again.Secrets)
	fresh, err := rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", "acme.example")})
	require.NoError(t, err)
	require.NotEqual(t, res.Secrets[passwordSecret], fresh.Secrets[passwordSecret])
	require.Equal(t, 535, replyCode(authenticate(addr(a), a.User, a.password)), "the old password is gone")
	b := decodeAccount(t, provisioned(fresh))
	require.NoError(t, authenticate(addr(b), b.User, b.password))

	// The data dir keeps no password, only hashes.
	raw, err := os.ReadFile(filepath.Join(dataDir, "accounts.json"))
	require.NoError(t, err)
	require.NotContains(t, string(raw), b.password)
	require.NotContains(t, string(raw), a.password)
	info, err := os.Stat(filepath.Join(dataDir, "accounts.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// The upstream refusing the relay's own log-in (a wrong upstream password) is a
// temporary failure to the app, which tries again; the password is in no log.
func TestUpstreamRefusalIsTemporary(t *testing.T) {
	t.Parallel()
	s := testSettings(t)
	wrong := filepath.Join(t.TempDir(), "wrong")
	require.NoError(t, os.WriteFile(wrong, []byte("not-the-upstream-password\n"), 0o600))
	s.Upstream.PasswordFile = wrong
	rc, logs := start(t, s)
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	subject := uniqueSubject("upstream")
	err := send(addr(a), a.User, a.password, submission{envelopeFrom: a.From, headerFrom: a.From, to: []string{"x@people.test"}, subject: subject})
	require.Equal(t, 451, replyCode(err), "%v", err)
	absent(t, subject)
	waitLog(t, logs, "the upstream did not take a message")
	require.NotContains(t, logs.String(), "not-the-upstream-password")
	require.NotContains(t, logs.String(), upstreamPassword)
}

// Requests the contract's schema lets through but the relay cannot send from are
// refused naming the field, without repeating the value.
func TestRequestsAreChecked(t *testing.T) {
	t.Parallel()
	s := testSettings(t)
	s.Domains = []string{"acme.example"}
	rc, _ := start(t, s)
	ctx := context.Background()
	for _, c := range []struct {
		spec  json.RawMessage
		field string
	}{
		{spec("no..reply", "acme.example"), "request/sender"},
		{spec("noreply.", "acme.example"), "request/sender"},
		{spec("noreply", "Acme.Example"), "request/domain"},
		{spec("noreply", "localhost-only"), "request/domain"},
		{spec("noreply", "beta.example"), "request/domain"}, // not in the settings' domains
		{json.RawMessage(`{"sender":"noreply","domain":"acme.example","extra":1}`), "request"},
	} {
		_, err := rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "mail", Type: contract.SMTP, Spec: c.spec})
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%s: %v", c.spec, err)
		require.True(t, strings.HasPrefix(sdk.FieldOf(err), c.field), "%s names %s", c.spec, sdk.FieldOf(err))
		require.NotContains(t, err.Error(), "no..reply")
		require.NotContains(t, err.Error(), "beta.example")
	}
	_, err := rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", "lists.acme.example")})
	require.NoError(t, err, "a name under a listed domain")
}

// After 10 refused log-ins from one address, the next log-ins from it, the right
// password too, are a temporary failure (454) until the limit refills.
func TestRefusedLoginsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	rc, logs := start(t, testSettings(t))
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	for i := 0; i < maxFailures; i++ {
		require.Equal(t, 535, replyCode(authenticate(addr(a), a.User, "wrong")), "refusal %d", i+1)
	}
	err := authenticate(addr(a), a.User, a.password)
	require.Equal(t, 454, replyCode(err), "%v", err)
	waitLog(t, logs, "authentication refused")
}
