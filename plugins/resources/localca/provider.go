package main

import (
	"bytes"
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
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

const (
	// keySecret is the entry of Result.Secrets (and Request.Secrets) holding the
	// certificate's private key, PKCS#8 PEM.
	keySecret = "key"
	// issuedDir holds the chain issued to each instance: <dir>/issued/<tenant>/<instance>.pem.
	issuedDir    = "issued"
	leafLifetime = 90 * 24 * time.Hour
	// renewBefore is how long a certificate must still be valid to be given again.
	renewBefore = 30 * 24 * time.Hour
)

type settings struct {
	Dir string `json:"dir,omitempty"`
}

// provider issues tls certificates from the host's CA.
type provider struct {
	now func() time.Time

	mu  sync.Mutex // one issue or removal at a time, and the CA made once
	dir string
	ca  *authority
}

func newProvider() *provider { return &provider{now: time.Now} }

// Configure opens the CA, making its key and root on first start.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &s); err != nil {
			return sdk.Invalid("settings", "settings are not an object: %v", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open(s.Dir)
}

func (p *provider) open(dir string) error {
	if dir == "" {
		dir = sdk.DataDir()
	}
	if dir == "" {
		return sdk.Invalid("settings/dir", "no directory for the CA: set dir, or run the plugin under the host, which gives it a data directory (%s)", sdk.DataDirEnv)
	}
	ca, err := loadOrCreateAuthority(dir, p.now())
	if err != nil {
		return err
	}
	p.dir, p.ca = dir, ca
	hclog.Default().Info("local CA open", "dir", dir, "subject", ca.root.Subject.CommonName, "not_after", ca.root.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// ready opens the CA in the data directory if Configure never ran; p.mu is held.
func (p *provider) ready() error {
	if p.ca != nil {
		return nil
	}
	return p.open("")
}

// Validate checks the request's names.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	_, err := domains(spec)
	return err
}

// Provision gives the instance's certificate again when it has the same names, was issued
// by this CA, is valid for more than renewBefore and its key came back in the request's
// secrets; otherwise it issues a new one with a fresh key. The key leaves only in
// Result.Secrets: the host keeps it in the secret resource, this provider keeps none.
func (p *provider) Provision(_ context.Context, req resource.Request) (resource.Result, error) {
	names, err := domains(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return resource.Result{}, err
	}
	path := p.issuedPath(req.Tenant, req.Instance)
	if chain, leaf, ok := p.reusable(path, names, req.Secrets[keySecret]); ok {
		return p.result(chain, leaf, req.Secrets[keySecret])
	}
	chain, leaf, keyPEM, err := p.issue(names)
	if err != nil {
		return resource.Result{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return resource.Result{}, fmt.Errorf("making the directory of issued certificates: %w", err)
	}
	if err := atomicfile.Write(path, chain, 0o600); err != nil {
		return resource.Result{}, err
	}
	hclog.Default().Info("certificate issued", "tenant", req.Tenant, "instance", req.Instance, "serial", leaf.SerialNumber.Text(16), "domains", len(names), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return p.result(chain, leaf, keyPEM)
}

// reusable returns the chain kept for the instance when it may be given again with key.
func (p *provider) reusable(path string, names []string, keyPEM []byte) ([]byte, *x509.Certificate, bool) {
	if keyPEM == nil {
		return nil, nil, false
	}
	chain, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, false
	}
	leaf, err := parseCertificate(chain)
	if err != nil {
		return nil, nil, false
	}
	key, err := parseKey(keyPEM)
	if err != nil || !key.PublicKey.Equal(leaf.PublicKey) {
		return nil, nil, false
	}
	if leaf.CheckSignatureFrom(p.ca.root) != nil || leaf.NotAfter.Sub(p.now()) <= renewBefore {
		return nil, nil, false
	}
	if !slices.Equal(slices.Sorted(slices.Values(leaf.DNSNames)), slices.Sorted(slices.Values(names))) {
		return nil, nil, false
	}
	return chain, leaf, true
}

// issue makes a key and a leaf certificate for names, signed by the CA; the chain is the
// leaf then the root.
func (p *provider) issue(names []string) (chain []byte, leaf *x509.Certificate, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating the certificate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, nil, err
	}
	now := p.now()
	notAfter := now.Add(leafLifetime)
	if notAfter.After(p.ca.root.NotAfter) {
		notAfter = p.ca.root.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		DNSNames:              names,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if len(names[0]) <= maxCommonName {
		tmpl.Subject = pkix.Name{CommonName: names[0]}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca.root, &key.PublicKey, p.ca.key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("signing the certificate: %w", err)
	}
	if leaf, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	var b bytes.Buffer
	b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	b.Write(p.ca.rootPEM)
	return b.Bytes(), leaf, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// result names the root as the chain's CA: no client trusts the host's CA by itself.
func (p *provider) result(chain []byte, leaf *x509.Certificate, keyPEM []byte) (resource.Result, error) {
	data, err := json.Marshal(contract.TLSResult{
		Certificate: string(chain),
		Key:         contract.SecretRef{Secret: keySecret},
		NotAfter:    leaf.NotAfter.UTC().Format(time.RFC3339),
		Issuer:      leaf.Issuer.CommonName,
		RenewAfter:  leaf.NotAfter.Add(-renewBefore).UTC().Format(time.RFC3339),
		CA:          string(p.ca.rootPEM),
	})
	if err != nil {
		return resource.Result{}, err
	}
	return resource.Result{Data: data, Secrets: map[string][]byte{keySecret: keyPEM}}, nil
}

func (p *provider) issuedPath(tenant, instance string) string {
	return filepath.Join(p.dir, issuedDir, tenant, instance+".pem")
}

// Deprovision forgets the instance's certificate, so the next provision issues a new one.
// A certificate holds no data, so Retain changes nothing; nothing is revoked: the local
// CA publishes no revocation list.
func (p *provider) Deprovision(_ context.Context, req resource.DeprovisionRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return err
	}
	path := p.issuedPath(req.Tenant, req.Instance)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forgetting the certificate of %s/%s: %w", req.Tenant, req.Instance, err)
	}
	// The tenant's directory goes with its last instance; one not empty stays.
	_ = os.Remove(filepath.Dir(path))
	hclog.Default().Info("certificate forgotten", "tenant", req.Tenant, "instance", req.Instance)
	return nil
}

var (
	_ resource.Provider  = (*provider)(nil)
	_ resource.Validator = (*provider)(nil)
	_ sdk.Configurer     = (*provider)(nil)
)
