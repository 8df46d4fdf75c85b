package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/mailpittest"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

var (
	// pluginBinary is the plugin built once for the package; mailpit is the upstream
	// server every test's relay hands messages to, with one account for the relay.
	pluginBinary string
	mailpit      *mailpittest.Server
	// mailpitTLS is a second upstream that requires STARTTLS. Both run for the whole
	// package: a test helper's server stopped while other tests start plugins ends the
	// OS thread it was locked to, and the parent-death signal of a plugin forked from
	// that thread before would kill the plugin.
	mailpitTLS       *mailpittest.Server
	upstreamUser     = "relay-upstream"
	upstreamPassword string
	upstreamPassFile string
)

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.MainWithServer(m, "mailpit", func(dir string) (func(), error) {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		upstreamPassword = hex.EncodeToString(b)
		upstreamPassFile = filepath.Join(dir, "upstream-password")
		if err := os.WriteFile(upstreamPassFile, []byte(upstreamPassword+"\n"), 0o600); err != nil {
			return nil, err
		}
		users := map[string]string{upstreamUser: upstreamPassword}
		for _, d := range []string{"plain", "tls"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				return nil, err
			}
		}
		s, stopPlain, err := mailpittest.Start(filepath.Join(dir, "plain"), mailpittest.Options{Users: users})
		if err != nil {
			return nil, err
		}
		st, stopTLS, err := mailpittest.Start(filepath.Join(dir, "tls"), mailpittest.Options{Users: users, STARTTLS: true})
		if err != nil {
			stopPlain()
			return nil, err
		}
		stop := func() { stopTLS(); stopPlain() }
		mailpit, mailpitTLS = s, st
		pluginBinary = filepath.Join(dir, "fedhost-resource-relay")
		if out, err := exec.Command("go", "build", "-o", pluginBinary, ".").CombinedOutput(); err != nil {
			stop()
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
		return stop, nil
	})
}

// testSettings are settings of a relay on a free loopback port without TLS, handing
// messages to mailpit with the relay's upstream account.
func testSettings(t testing.TB) settings {
	t.Helper()
	port, err := child.FreePort()
	require.NoError(t, err)
	host, p, err := net.SplitHostPort(mailpit.SMTPAddr)
	require.NoError(t, err)
	up, err := strconv.Atoi(p)
	require.NoError(t, err)
	return settings{
		Listen:   fmt.Sprintf("127.0.0.1:%d", port),
		TLS:      "none",
		Upstream: upstream{Host: host, Port: up, TLS: "none", User: upstreamUser, PasswordFile: upstreamPassFile},
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs the plugin with s on a data dir of its own, its logs in the buffer.
func start(t testing.TB, s settings) (*resource.Client, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	rc, _ := startLogged(t, s, t.TempDir(), logs)
	return rc, logs
}

// startIn runs the plugin with s on dataDir; stop kills it.
func startIn(t testing.TB, s settings, dataDir string) (*resource.Client, func()) {
	t.Helper()
	return startLogged(t, s, dataDir, &lockedBuffer{})
}

func startLogged(t testing.TB, s settings, dataDir string, logs *lockedBuffer) (*resource.Client, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	p, err := client.Start(ctx, pluginBinary, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+dataDir))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	require.NoError(t, p.Configure(ctx, raw))
	return p.Resource(), p.Kill
}

// waitLog waits until the plugin's log, which reaches the test through go-plugin's
// stderr stream a little after the plugin wrote it, holds text.
func waitLog(t testing.TB, logs *lockedBuffer, text string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), text) }, 10*time.Second, 20*time.Millisecond, "the plugin's log never said %q", text)
}

func provisioned(r resource.Result) conformance.Provisioned {
	return conformance.Provisioned{Result: r.Data, Secrets: r.Secrets}
}

func spec(sender, domain string) json.RawMessage {
	b, _ := json.Marshal(contract.SMTPRequest{Sender: sender, Domain: domain})
	return b
}

// account is a provisioned result with its password.
type testAccount struct {
	contract.SMTPResult
	password string
}

func provision(t testing.TB, rc *resource.Client, tenant, instance string, req json.RawMessage) testAccount {
	t.Helper()
	res, err := rc.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: instance, Type: contract.SMTP, Spec: req})
	require.NoError(t, err)
	return decodeAccount(t, conformance.Provisioned{Result: res.Data, Secrets: res.Secrets})
}

func decodeAccount(t testing.TB, p conformance.Provisioned) testAccount {
	t.Helper()
	var a testAccount
	require.NoError(t, json.Unmarshal(p.Result, &a.SMTPResult))
	a.password = string(p.Secrets[a.Password.Secret])
	return a
}

// submission is one message sent: envelope and header.
type submission struct {
	envelopeFrom, headerFrom string
	to                       []string
	subject                  string
	extraHeaders             string
}

// send submits m with Go's own SMTP client (net/smtp, another implementation than the
// relay's), authenticating as user with AUTH PLAIN.
func send(addr, user, password string, m submission) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	// net/smtp sends PLAIN credentials without TLS only to a host it sees as localhost.
	if err := c.Auth(smtp.PlainAuth("", user, password, "127.0.0.1")); err != nil {
		return err
	}
	if err := c.Mail(m.envelopeFrom); err != nil {
		return err
	}
	for _, r := range m.to {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "From: Test <%s>\r\nTo: %s\r\nSubject: %s\r\n%sMessage-ID: <%s@relay.test>\r\n\r\nHello from the relay test.\r\n",
		m.headerFrom, strings.Join(m.to, ", "), m.subject, m.extraHeaders, m.subject)
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// uniqueSubject names one test's message in mailpit.
func uniqueSubject(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// arrived waits until mailpit holds the message of subject and returns it.
func arrived(t testing.TB, subject string) mailpittest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := mailpit.WaitFor(ctx, `subject:"`+subject+`"`)
	require.NoError(t, err, mailpit.Log())
	return m
}

// absent checks that mailpit holds no message of subject.
func absent(t testing.TB, subject string) {
	t.Helper()
	ms, err := mailpit.Search(context.Background(), `subject:"`+subject+`"`)
	require.NoError(t, err)
	require.Empty(t, ms, "a refused message reached the upstream")
}

func addr(a testAccount) string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

func TestConformance(t *testing.T) {
	s := testSettings(t)
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	conformance.Resource(t, pluginBinary, conformance.ResourceCase{
		Type:     contract.SMTP,
		Settings: raw,
		// A domain belongs to one deployment, so each tenant asks for its own.
		RequestFor:   func(tenant string) json.RawMessage { return spec("noreply", tenant+".example") },
		Invalid:      spec("noreply", "10.0.0.1"),
		InvalidField: "request/domain",
		// The credentials of from reach the object of to when they send a message as
		// to's address and it arrives.
		Access: func(_ context.Context, from, to conformance.Provisioned) error {
			a, b := decodeAccount(t, from), decodeAccount(t, to)
			subject := uniqueSubject("access")
			err := send(addr(a), a.User, a.password, submission{envelopeFrom: b.From, headerFrom: b.From, to: []string{"someone@recipient.test"}, subject: subject})
			if err != nil {
				return err
			}
			arrived(t, subject)
			return nil
		},
		// The account exists when the relay takes its log-in.
		Exists: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			a := decodeAccount(t, p)
			err := authenticate(addr(a), a.User, a.password)
			if replyCode(err) == 535 {
				return false, nil
			}
			return err == nil, err
		},
	})
}

// authenticate logs in and out.
func authenticate(addr, user, password string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Auth(smtp.PlainAuth("", user, password, "127.0.0.1")); err != nil {
		return err
	}
	return c.Quit()
}

// replyCode is the SMTP reply code of err, 0 when it is not a reply.
func replyCode(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}
