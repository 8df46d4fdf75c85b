package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/smtp"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

// Settings that would send passwords in the clear or cannot work are refused naming the
// setting, without repeating a value.
func TestSettingsAreChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	twoLines := filepath.Join(dir, "two-lines")
	require.NoError(t, os.WriteFile(twoLines, []byte("secret-one\nsecret-two\n"), 0o600))
	for _, c := range []struct {
		raw, field string
	}{
		{`{"listen":"0.0.0.0:587","host":"mail.provider.test","tls":"none","upstream":{"host":"smtp.provider.test"}}`, "settings/tls"},
		{`{"listen":"0.0.0.0:587","upstream":{"host":"smtp.provider.test"},"tls":"starttls","cert_file":"/x","key_file":"/y"}`, "settings/host"},
		{`{"listen":"127.0.0.1:587","upstream":{"host":"smtp.provider.test"}}`, "settings/cert_file"},
		{`{"listen":"127.0.0.1:587","tls":"starttls","cert_file":"/nonexistent/c.pem","key_file":"/nonexistent/k.pem","upstream":{"host":"smtp.provider.test"}}`, "settings/cert_file"},
		{`{"listen":"127.0.0.1","tls":"none","upstream":{"host":"smtp.provider.test"}}`, "settings/listen"},
		{`{"listen":"127.0.0.1:587","tls":"none","upstream":{"host":"smtp.provider.test","user":"relay"}}`, "settings/upstream/password_file"},
		{`{"listen":"127.0.0.1:587","tls":"none","upstream":{"host":"smtp.provider.test","user":"relay","password_file":"` + twoLines + `"}}`, "settings/upstream/password_file"},
		{`{"listen":"127.0.0.1:587","tls":"none","upstream":{"host":"smtp.provider.test","ca_file":"` + twoLines + `"}}`, "settings/upstream/ca_file"},
		{`{"listen":"127.0.0.1:587","tls":"none","domains":["*.acme.example"],"upstream":{"host":"smtp.provider.test"}}`, "settings/domains/0"},
		{`{"listen":"127.0.0.1:587","tls":"none","upstream":{}}`, "settings/upstream/host"},
		{`{"listen":"127.0.0.1:587","tls":"none","upstream":{"host":"x"},"extra":true}`, "settings"},
	} {
		_, err := parseSettings(json.RawMessage(c.raw))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%s: %v", c.raw, err)
		require.Equal(t, c.field, sdk.FieldOf(err), "%s: %v", c.raw, err)
		require.NotContains(t, err.Error(), "secret-one")
	}
	cfg, err := parseSettings(json.RawMessage(`{"listen":"127.0.0.1:2525","tls":"none","upstream":{"host":"smtp.provider.test"}}`))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", cfg.Host)
	require.Equal(t, 2525, cfg.Port)
	require.Equal(t, 587, cfg.Upstream.Port)
	require.Equal(t, "starttls", cfg.Upstream.TLS)
	require.Equal(t, int64(10<<20), cfg.MaxMessageBytes)
}

// With tls starttls, the relay offers AUTH only after STARTTLS; a client that checks the
// certificate against its CA then logs in and sends.
func TestStartTLSListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caPEM := writeCertificate(t, dir)
	s := testSettings(t)
	s.TLS, s.CertFile, s.KeyFile = "starttls", filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	s.Host = "localhost"
	rc, _ := start(t, s)
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	require.Equal(t, "starttls", a.TLS)
	require.Equal(t, "localhost", a.Host)
	address := strings.Replace(addr(a), "localhost", "127.0.0.1", 1)

	c, err := smtp.Dial(address)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("client.test"))
	ok, _ := c.Extension("AUTH")
	require.False(t, ok, "AUTH is not offered before STARTTLS")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	require.NoError(t, c.StartTLS(&tls.Config{ServerName: "localhost", RootCAs: pool}))
	ok, _ = c.Extension("AUTH")
	require.True(t, ok)
	require.NoError(t, c.Auth(smtp.PlainAuth("", a.User, a.password, "127.0.0.1")))
	subject := uniqueSubject("starttls")
	require.NoError(t, c.Mail(a.From))
	require.NoError(t, c.Rcpt("x@people.test"))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write([]byte("From: " + a.From + "\r\nSubject: " + subject + "\r\n\r\nover TLS\r\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Quit())
	arrived(t, subject)
}

// writeCertificate writes cert.pem and key.pem for localhost and 127.0.0.1 into dir,
// signed by a CA whose PEM it returns.
func writeCertificate(t *testing.T, dir string) []byte {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay test CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leaf, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf}), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// With upstream.tls starttls the relay checks the upstream's certificate against
// upstream.ca_file before it logs in: a mailpit that requires STARTTLS gets the message;
// without the CA the relay refuses the upstream and the app is told to try again.
func TestUpstreamOverSTARTTLS(t *testing.T) {
	t.Parallel()
	up := mailpitTLS
	host, p, err := net.SplitHostPort(up.SMTPAddr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)

	s := testSettings(t)
	s.Upstream = upstream{Host: host, Port: port, TLS: "starttls", CAFile: up.CAFile, User: upstreamUser, PasswordFile: upstreamPassFile}
	rc, _ := start(t, s)
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	subject := uniqueSubject("upstream-tls")
	require.NoError(t, send(addr(a), a.User, a.password, submission{envelopeFrom: a.From, headerFrom: a.From, to: []string{"x@people.test"}, subject: subject}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = up.WaitFor(ctx, `subject:"`+subject+`"`)
	require.NoError(t, err, up.Log())

	s = testSettings(t)
	s.Upstream = upstream{Host: host, Port: port, TLS: "starttls", User: upstreamUser, PasswordFile: upstreamPassFile}
	rc, logs := start(t, s)
	a = provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	err = send(addr(a), a.User, a.password, submission{envelopeFrom: a.From, headerFrom: a.From, to: []string{"x@people.test"}, subject: uniqueSubject("untrusted")})
	require.Equal(t, 451, replyCode(err), "%v", err)
	waitLog(t, logs, "certificate")
}

// With tls tls (implicit TLS, RFC 8314) the connection is TLS from its first byte, and a
// client that checks the certificate logs in and sends.
func TestImplicitTLSListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caPEM := writeCertificate(t, dir)
	s := testSettings(t)
	s.TLS, s.CertFile, s.KeyFile = "tls", filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	rc, _ := start(t, s)
	a := provision(t, rc, "acme", "mail", spec("noreply", "acme.example"))
	require.Equal(t, "tls", a.TLS)

	plain, err := net.DialTimeout("tcp", addr(a), 5*time.Second)
	require.NoError(t, err)
	_ = plain.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 3)
	_, err = plain.Read(buf)
	require.Error(t, err, "no plain-text greeting: the server waits for a TLS ClientHello")
	plain.Close()

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	conn, err := tls.Dial("tcp", addr(a), &tls.Config{ServerName: "127.0.0.1", RootCAs: pool})
	require.NoError(t, err)
	c, err := smtp.NewClient(conn, "127.0.0.1")
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Auth(smtp.PlainAuth("", a.User, a.password, "127.0.0.1")))
	subject := uniqueSubject("implicit-tls")
	require.NoError(t, c.Mail(a.From))
	require.NoError(t, c.Rcpt("x@people.test"))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write([]byte("From: " + a.From + "\r\nSubject: " + subject + "\r\n\r\nover implicit TLS\r\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Quit())
	arrived(t, subject)
}

// A renewed certificate is served without a restart; a half-written pair keeps the last
// good one in service.
func TestCertificateIsReadAgainWhenItChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeCertificate(t, dir)
	c := &certificate{certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	first, err := c.get(nil)
	require.NoError(t, err)
	again, err := c.get(nil)
	require.NoError(t, err)
	require.Same(t, first, again)

	writeCertificate(t, dir) // renewed: a new key and certificate
	c.mu.Lock()
	c.checked = time.Time{} // as if 10 s had passed
	c.mu.Unlock()
	renewed, err := c.get(nil)
	require.NoError(t, err)
	require.NotEqual(t, first.Certificate[0], renewed.Certificate[0])

	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), []byte("-----BEGIN PRIVATE KEY-----\n"), 0o600))
	c.mu.Lock()
	c.checked = time.Time{}
	c.mu.Unlock()
	kept, err := c.get(nil)
	require.NoError(t, err)
	require.Same(t, renewed, kept)
}
