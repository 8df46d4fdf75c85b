// Package mailpittest starts mailpit (github.com/axllent/mailpit), an SMTP sink with a
// REST API, on loopback for a package's tests: what is sent to its SMTP port is kept in
// its database and read back through /api/v1.
package mailpittest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fedhost/fedhost/internal/child"
)

// Options say who may submit to mailpit.
type Options struct {
	// Users, when set, are the only accounts mailpit takes SMTP AUTH PLAIN from (user to
	// password; it takes them over a connection without TLS unless STARTTLS is set).
	// Unset, mailpit takes any account and none.
	Users map[string]string
	// STARTTLS makes mailpit require STARTTLS, with a certificate for 127.0.0.1 and
	// localhost signed by a CA made here (Server.CAFile).
	STARTTLS bool
}

// Server is a running mailpit.
type Server struct {
	// SMTPAddr is host:port of its SMTP listener, on 127.0.0.1.
	SMTPAddr string
	// APIURL is the root of its web UI and REST API, ending in "/".
	APIURL string
	// CAPEM is the CA of mailpit's SMTP certificate with Options.STARTTLS, and CAFile
	// holds it; both empty without.
	CAPEM  []byte
	CAFile string

	dir    string
	client *http.Client
}

// Address is a mailbox as mailpit shows it.
type Address struct {
	Name    string `json:"Name"`
	Address string `json:"Address"`
}

// Message is a message mailpit received, as its API lists it.
type Message struct {
	ID      string    `json:"ID"`
	From    Address   `json:"From"`
	To      []Address `json:"To"`
	Subject string    `json:"Subject"`
	Size    int       `json:"Size"`
}

// Start runs mailpit with its database and log in dir, as a child killed with the test
// process, and waits until its API answers. The binary is bin/artifacts/mailpit of the
// repository (make test-artifacts) or, when missing, built into dir from the module's
// pinned tool.
func Start(dir string, o Options) (*Server, func(), error) {
	bin, err := binary(dir)
	if err != nil {
		return nil, nil, err
	}
	smtpPort, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	httpPort, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	s := &Server{
		SMTPAddr: fmt.Sprintf("127.0.0.1:%d", smtpPort),
		APIURL:   fmt.Sprintf("http://127.0.0.1:%d/", httpPort),
		dir:      dir,
		client:   &http.Client{Timeout: 10 * time.Second},
	}
	args := []string{
		"--database", filepath.Join(dir, "mailpit.db"),
		"--smtp", s.SMTPAddr,
		"--listen", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--smtp-disable-rdns",
		"--disable-version-check",
	}
	if o.STARTTLS {
		certFile, keyFile := filepath.Join(dir, "mailpit-cert.pem"), filepath.Join(dir, "mailpit-key.pem")
		if s.CAPEM, err = writeCertificate(certFile, keyFile); err != nil {
			return nil, nil, err
		}
		s.CAFile = filepath.Join(dir, "mailpit-ca.pem")
		if err := os.WriteFile(s.CAFile, s.CAPEM, 0o644); err != nil {
			return nil, nil, err
		}
		args = append(args, "--smtp-tls-cert", certFile, "--smtp-tls-key", keyFile, "--smtp-require-starttls")
	}
	if len(o.Users) > 0 {
		authFile := filepath.Join(dir, "mailpit-smtp-users")
		if err := writeAuthFile(authFile, o.Users); err != nil {
			return nil, nil, err
		}
		args = append(args, "--smtp-auth-file", authFile)
	} else {
		args = append(args, "--smtp-auth-accept-any")
	}
	if !o.STARTTLS {
		// mailpit refuses to start with any SMTP AUTH setting on a plain connection.
		args = append(args, "--smtp-auth-allow-insecure")
	}
	logPath := filepath.Join(dir, "mailpit.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited, err := child.Start(cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := s.ready()
		if err == nil {
			return s, stop, nil
		}
		select {
		case <-exited:
			return nil, nil, fmt.Errorf("mailpit exited at start:\n%s", child.Tail(logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("mailpit did not answer within 20s: %v\n%s", err, child.Tail(logPath, 30))
		}
	}
}

// ready reports whether both the API and the SMTP port answer.
func (s *Server) ready() error {
	resp, err := s.client.Get(s.APIURL + "api/v1/info")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("api/v1/info: %s", resp.Status)
	}
	c, err := net.DialTimeout("tcp", s.SMTPAddr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// Log is the end of mailpit's log, for a failing test's message.
func (s *Server) Log() string {
	return strings.TrimSpace(child.Tail(filepath.Join(s.dir, "mailpit.log"), 30))
}

// Messages lists the messages received, newest first (at most 1,000).
func (s *Server) Messages(ctx context.Context) ([]Message, error) {
	var out struct {
		Messages []Message `json:"messages"`
	}
	if err := s.getJSON(ctx, "api/v1/messages?limit=1000", &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// Search lists the messages matching a mailpit search query (to:alice@acme.example,
// subject:"Welcome"), newest first.
func (s *Server) Search(ctx context.Context, query string) ([]Message, error) {
	var out struct {
		Messages []Message `json:"messages"`
	}
	if err := s.getJSON(ctx, "api/v1/search?limit=1000&query="+url.QueryEscape(query), &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// WaitFor polls Search until a message matches query or ctx ends, and returns the newest.
func (s *Server) WaitFor(ctx context.Context, query string) (Message, error) {
	for {
		ms, err := s.Search(ctx, query)
		if err == nil && len(ms) > 0 {
			return ms[0], nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("no message matches")
			}
			return Message{}, fmt.Errorf("waiting for a message matching %s: %w (%v)", query, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Raw is the message's source as mailpit received it.
func (s *Server) Raw(ctx context.Context, id string) ([]byte, error) {
	return s.get(ctx, "api/v1/message/"+url.PathEscape(id)+"/raw")
}

// Text is the message's plain-text body.
func (s *Server) Text(ctx context.Context, id string) (string, error) {
	var out struct {
		Text string `json:"Text"`
	}
	if err := s.getJSON(ctx, "api/v1/message/"+url.PathEscape(id), &out); err != nil {
		return "", err
	}
	return out.Text, nil
}

// ReturnPath is the envelope sender (MAIL FROM) mailpit recorded for the message.
func (s *Server) ReturnPath(ctx context.Context, id string) (string, error) {
	var out struct {
		ReturnPath string `json:"ReturnPath"`
	}
	if err := s.getJSON(ctx, "api/v1/message/"+url.PathEscape(id), &out); err != nil {
		return "", err
	}
	return out.ReturnPath, nil
}

// DeleteAll removes every message.
func (s *Server) DeleteAll(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.APIURL+"api/v1/messages", nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mailpit: DELETE api/v1/messages: %s", resp.Status)
	}
	return nil
}

func (s *Server) getJSON(ctx context.Context, path string, v any) error {
	b, err := s.get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("mailpit: GET %s: %w", path, err)
	}
	return nil
}

func (s *Server) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.APIURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("mailpit: GET %s: %s", path, resp.Status)
	}
	return b, nil
}

// writeAuthFile writes an htpasswd file with bcrypt hashes, the format mailpit reads.
func writeAuthFile(path string, users map[string]string) error {
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, u := range names {
		h, err := bcrypt.GenerateFromPassword([]byte(users[u]), bcrypt.MinCost)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s:%s\n", u, h)
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// built is the binary built by this process, kept for the next Start while it exists.
var (
	builtMu sync.Mutex
	built   string
)

// binary finds mailpit built by make test-artifacts, or builds it into dir once per
// process.
func binary(dir string) (string, error) {
	builtMu.Lock()
	defer builtMu.Unlock()
	if built != "" && isFile(built) {
		return built, nil
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	if p := filepath.Join(root, "bin", "artifacts", "mailpit"); isFile(p) {
		return p, nil
	}
	p := filepath.Join(dir, "mailpit")
	cmd := exec.Command("go", "build", "-o", p, "github.com/axllent/mailpit")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build mailpit: %v\n%s", err, b)
	}
	built = p
	return p, nil
}

// writeCertificate makes a CA and, signed by it, a certificate for 127.0.0.1 and
// localhost; it writes the leaf and its key for mailpit and returns the CA's PEM.
func writeCertificate(certFile, keyFile string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mailpittest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "mailpit"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
