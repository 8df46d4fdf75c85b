// Package pebbletest starts pebble, Let's Encrypt's ACME test server (RFC 8555), on
// loopback for a package's tests: it validates challenges by resolving names through
// the DNS server the caller gives (a bindtest named), with its retry delays off.
package pebbletest

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
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fedhost/fedhost/internal/child"
)

// Options say how pebble validates.
type Options struct {
	// DNSServer is host:port of the server pebble resolves every name through.
	DNSServer string
	// HTTPPort and TLSPort are the ports pebble connects to for HTTP-01 and
	// TLS-ALPN-01 challenges; 0 gives 5002 and 5001, pebble's own defaults.
	HTTPPort, TLSPort int
	// Blocklist are names pebble refuses to order for (rejectedIdentifier), with the
	// names under them.
	Blocklist []string
	// ValidityPeriod is how long the certificates pebble issues are valid; 0 gives 90
	// days, as Let's Encrypt's have been. A little over a renewal window makes
	// certificates fall due while a test runs.
	ValidityPeriod time.Duration
}

// Server is a running pebble.
type Server struct {
	// DirectoryURL is the ACME directory, https on 127.0.0.1.
	DirectoryURL string
	// ListenerCAPEM is the CA of the certificate pebble's listeners serve (made here):
	// what an ACME client trusts to talk to pebble. CAFile holds it.
	ListenerCAPEM []byte
	CAFile        string

	managementURL string
	dir           string
}

// Start runs pebble with its configuration, certificate and log in dir, as a child
// killed with the test process, and waits until its directory answers. The binary is
// bin/artifacts/pebble of the repository (make test-artifacts) or, when missing, built
// into dir from the module's pinned tool.
func Start(dir string, o Options) (*Server, func(), error) {
	if o.DNSServer == "" {
		return nil, nil, errors.New("pebbletest: Options.DNSServer is needed: pebble resolves the names it validates through it")
	}
	if o.HTTPPort == 0 {
		o.HTTPPort = 5002
	}
	if o.TLSPort == 0 {
		o.TLSPort = 5001
	}
	if o.ValidityPeriod == 0 {
		o.ValidityPeriod = 90 * 24 * time.Hour
	}
	bin, err := binary(dir)
	if err != nil {
		return nil, nil, err
	}
	s := &Server{CAFile: filepath.Join(dir, "pebble-listener-ca.pem"), dir: dir}
	certFile, keyFile := filepath.Join(dir, "pebble-cert.pem"), filepath.Join(dir, "pebble-key.pem")
	if s.ListenerCAPEM, err = writeListenerCertificate(certFile, keyFile); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(s.CAFile, s.ListenerCAPEM, 0o644); err != nil {
		return nil, nil, err
	}
	port, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	mport, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	var conf struct {
		Pebble map[string]any `json:"pebble"`
	}
	conf.Pebble = map[string]any{
		"listenAddress":                  fmt.Sprintf("127.0.0.1:%d", port),
		"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", mport),
		"certificate":                    certFile,
		"privateKey":                     keyFile,
		"httpPort":                       o.HTTPPort,
		"tlsPort":                        o.TLSPort,
		"externalAccountBindingRequired": false,
		"keyAlgorithm":                   "ecdsa",
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		"domainBlocklist":                o.Blocklist,
		"profiles":                       map[string]any{"default": map[string]any{"description": "the test's validity", "validityPeriod": int64(o.ValidityPeriod / time.Second)}},
	}
	b, err := json.Marshal(conf)
	if err != nil {
		return nil, nil, err
	}
	confFile := filepath.Join(dir, "pebble-config.json")
	if err := os.WriteFile(confFile, b, 0o644); err != nil {
		return nil, nil, err
	}
	s.DirectoryURL = fmt.Sprintf("https://127.0.0.1:%d/dir", port)
	s.managementURL = fmt.Sprintf("https://127.0.0.1:%d", mport)

	logPath := filepath.Join(dir, "pebble.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-config", confFile, "-dnsserver", o.DNSServer)
	// No sleeps before validating, no nonces refused at random, and every order
	// validated anew (no authorization reused), so tests see each challenge answered.
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
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
	client := s.HTTPClient()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get(s.DirectoryURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, stop, nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		select {
		case <-exited:
			return nil, nil, fmt.Errorf("pebble exited at start:\n%s", child.Tail(logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("pebble's directory did not answer within 20s: %v\n%s", err, child.Tail(logPath, 30))
		}
	}
}

// Log is the end of pebble's log, for a failing test's message.
func (s *Server) Log() string {
	return strings.TrimSpace(child.Tail(filepath.Join(s.dir, "pebble.log"), 30))
}

// HTTPClient trusts pebble's listeners.
func (s *Server) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ListenerCAPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// Root returns pebble's issuing root (PEM) from its management interface. Pebble makes
// a new one at every start, so a chain is verified against the root of this run.
func (s *Server) Root(ctx context.Context) (*x509.Certificate, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.managementURL+"/roots/0", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.HTTPClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching pebble's root: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching pebble's root: %s", resp.Status)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("pebble's root is not PEM")
	}
	return x509.ParseCertificate(block.Bytes)
}

// binary finds pebble built by make test-artifacts, or builds it into dir.
func binary(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	if p := filepath.Join(root, "bin", "artifacts", "pebble"); isFile(p) {
		return p, nil
	}
	p := filepath.Join(dir, "pebble")
	cmd := exec.Command("go", "build", "-o", p, "github.com/letsencrypt/pebble/v2/cmd/pebble")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build pebble: %v\n%s", err, b)
	}
	return p, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// writeListenerCertificate makes a CA and, signed by it, a certificate for 127.0.0.1
// and localhost; it writes the leaf and its key for pebble and returns the CA's PEM.
func writeListenerCertificate(certFile, keyFile string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pebbletest listener CA"},
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
		Subject:      pkix.Name{CommonName: "pebble"},
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
