package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-acme/lego/v5/acme"
	"github.com/go-acme/lego/v5/certcrypto"
	"github.com/go-acme/lego/v5/certificate"
	"github.com/go-acme/lego/v5/challenge/dns01"
	"github.com/go-acme/lego/v5/challenge/http01"
	"github.com/go-acme/lego/v5/lego"
	legolog "github.com/go-acme/lego/v5/log"
	"github.com/go-acme/lego/v5/providers/dns/dnsupdate"
	"github.com/go-acme/lego/v5/registration"
	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

const (
	// keySecret is the entry of Result.Secrets (and Request.Secrets) holding the
	// certificate's private key, PEM.
	keySecret = "key"
	// accountKeySecret holds the ACME account's key, PEM: the CA finds the account again
	// by it (RFC 8555 7.3.1, onlyReturnExisting), so the plugin keeps no account of its own.
	accountKeySecret = "account-key"
	// issuedDir holds the chain issued to each instance: <dir>/issued/<tenant>/<instance>.json.
	issuedDir = "issued"
	// maxIssued bounds the file of an issued chain read back.
	maxIssued  = 1 << 20
	maxIssuer  = 256
	userAgent  = "fedhost-resource-acme/0.1.0"
	dnsTimeout = 10 * time.Second
)

// provider issues tls certificates from an ACME CA.
type provider struct {
	now func() time.Time

	mu  sync.Mutex // one issuance at a time: the HTTP-01 listener and lego's DNS client are shared
	cfg *config
	dir string
}

func newProvider() *provider { return &provider{now: time.Now} }

// Configure checks the settings; the CA is first reached by a provision.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseSettings(raw)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dir = cfg.dir
	if p.dir == "" {
		p.dir = sdk.DataDir()
	}
	if p.dir == "" {
		return sdk.Invalid("settings/dir", "no directory for the issued certificates: set dir, or run the plugin under the host, which gives it a data directory (%s)", sdk.DataDirEnv)
	}
	// lego's log says what it does with tokens and key authorizations in its messages:
	// the plugin logs its own events, without them.
	legolog.SetDefault(slog.New(slog.DiscardHandler))
	opts := dns01.NewOptions()
	opts.RecursiveNameservers, opts.Timeout = cfg.resolvers, dnsTimeout
	dns01.SetDefaultClient(dns01.NewClient(opts))
	p.cfg = cfg
	hclog.Default().Info("acme provider configured", "directory_url", cfg.directoryURL, "key_type", string(cfg.keyType), "http01", cfg.http01Port != "")
	return nil
}

func (p *provider) config() (*config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg == nil {
		return nil, sdk.Invalid("settings/directory_url", "the plugin has no settings: give directory_url, the CA's ACME directory")
	}
	return p.cfg, nil
}

// Validate checks the request without the network.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	cfg, err := p.config()
	if err != nil {
		return err
	}
	_, err = parseRequest(spec, cfg.http01Port != "")
	return err
}

// issued is what the plugin keeps of an instance's certificate: the chain (public) and
// the CA it came from. The keys are in the host's secrets.
type issued struct {
	DirectoryURL string `json:"directory_url"`
	Chain        string `json:"chain"`
}

// Provision gives the instance's certificate again while it has the same names, came
// from the same CA, its renewal time has not come and its key and account key came back
// in the request's secrets; otherwise it orders a new one, with a new key.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	cfg, err := p.config()
	if err != nil {
		return resource.Result{}, err
	}
	r, err := parseRequest(req.Spec, cfg.http01Port != "")
	if err != nil {
		return resource.Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	path := p.issuedPath(req.Tenant, req.Instance)
	keyPEM, accountPEM := req.Secrets[keySecret], req.Secrets[accountKeySecret]
	if chain, leaf, ok := p.reusable(cfg, path, r.domains, keyPEM); ok && accountPEM != nil {
		return result(cfg, chain, leaf, keyPEM, accountPEM)
	}
	res, accountPEM, err := p.obtain(ctx, cfg, r, req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	leaf, err := parseLeaf(res.Certificate)
	if err != nil {
		return resource.Result{}, fmt.Errorf("the CA's certificate: %w", err)
	}
	b, err := json.Marshal(issued{DirectoryURL: cfg.directoryURL, Chain: string(res.Certificate)})
	if err != nil {
		return resource.Result{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return resource.Result{}, fmt.Errorf("making the directory of issued certificates: %w", err)
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return resource.Result{}, err
	}
	hclog.Default().Info("certificate issued", "tenant", req.Tenant, "instance", req.Instance, "challenge", r.challenge, "serial", leaf.SerialNumber.Text(16), "domains", len(r.domains), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return result(cfg, res.Certificate, leaf, res.PrivateKey, accountPEM)
}

// reusable returns the chain kept for the instance when it may be given again with key.
func (p *provider) reusable(cfg *config, path string, names []string, keyPEM []byte) ([]byte, *x509.Certificate, bool) {
	if keyPEM == nil {
		return nil, nil, false
	}
	b, err := readBounded(path, maxIssued)
	if err != nil {
		return nil, nil, false
	}
	var is issued
	if json.Unmarshal(b, &is) != nil || is.DirectoryURL != cfg.directoryURL {
		return nil, nil, false
	}
	leaf, err := parseLeaf([]byte(is.Chain))
	if err != nil {
		return nil, nil, false
	}
	key, err := certcrypto.ParsePEMPrivateKey(keyPEM)
	if err != nil {
		return nil, nil, false
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return nil, nil, false
	}
	if !p.now().Before(renewAfter(cfg, leaf)) {
		return nil, nil, false
	}
	if !slices.Equal(slices.Sorted(slices.Values(leaf.DNSNames)), slices.Sorted(slices.Values(names))) {
		return nil, nil, false
	}
	return []byte(is.Chain), leaf, true
}

// renewAfter is renew_before_days before the end of leaf, or two thirds into its life
// when it is shorter than that (a short-lived certificate).
func renewAfter(cfg *config, leaf *x509.Certificate) time.Time {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if life <= cfg.renewBefore {
		return leaf.NotBefore.Add(life * 2 / 3)
	}
	return leaf.NotAfter.Add(-cfg.renewBefore)
}

// account is the lego user: the ACME account of one instance's certificates.
type account struct {
	email string
	key   crypto.Signer
	reg   *acme.ExtendedAccount
}

func (a *account) GetEmail() string                       { return a.email }
func (a *account) GetRegistration() *acme.ExtendedAccount { return a.reg }
func (a *account) GetPrivateKey() crypto.Signer           { return a.key }

// obtain orders a certificate for r with the account of accountPEM (a new one when nil)
// and answers its challenges; it returns the certificate and the account key.
func (p *provider) obtain(ctx context.Context, cfg *config, r request, secrets map[string][]byte) (*certificate.Resource, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	accountPEM := secrets[accountKeySecret]
	a := &account{email: cfg.email}
	if accountPEM != nil {
		key, err := certcrypto.ParsePEMPrivateKey(accountPEM)
		if err != nil {
			return nil, nil, sdk.Invalid("secrets/"+accountKeySecret, "the account key given back is not a PEM private key: deprovision the resource to start a new account")
		}
		a.key = key
	} else {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("generating the account key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		a.key, accountPEM = key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	lc := lego.NewConfig(a)
	lc.CADirURL, lc.HTTPClient, lc.UserAgent = cfg.directoryURL, cfg.httpClient, userAgent
	lc.Certificate.Timeout = cfg.timeout
	client, err := lego.NewClient(lc)
	if err != nil {
		return nil, nil, sdk.Unavailable("the ACME directory of settings/directory_url did not answer: %s", scrub(err.Error()))
	}
	if secrets[accountKeySecret] != nil {
		a.reg, err = client.Registration.ResolveAccountByKey(ctx)
		if pd := problem(err); pd != nil && pd.Type == acme.AccountDoesNotExistErrorType {
			err = nil // the CA forgot the account (a test CA restarted): register the key again
		}
	}
	if a.reg == nil && err == nil {
		a.reg, err = client.Registration.Register(ctx, registration.RegisterOptions{TermsOfServiceAgreed: true})
	}
	if err != nil {
		field := "settings/directory_url"
		if pd := problem(err); pd != nil && (pd.Type == acme.InvalidContactErrorType || pd.Type == acme.UnsupportedContactErrorType) {
			field = "settings/email"
		}
		return nil, nil, caError(err, "registering the ACME account", nil, field)
	}
	switch r.challenge {
	case challengeDNS01:
		secret := secrets[r.dns.Secret.Secret]
		if len(secret) == 0 {
			return nil, nil, sdk.Invalid("request/dns/secret/secret", "the host gave no value for the TSIG key this names: provision the dns resource first and give its update.secret")
		}
		dp, err := dnsupdate.NewDNSProviderConfig(&dnsupdate.Config{
			Nameserver:         r.dns.Server,
			DNSTimeout:         dnsTimeout,
			TSIGAlgorithm:      r.dns.Algorithm + ".",
			TSIGKey:            r.dns.KeyName,
			TSIGSecret:         string(secret),
			PropagationTimeout: cfg.timeout,
			PollingInterval:    500 * time.Millisecond,
			SequenceInterval:   100 * time.Millisecond,
			TTL:                60,
		})
		if err != nil {
			return nil, nil, sdk.Invalid("request/dns", "the update key cannot be used: %s", scrub(err.Error()))
		}
		// With resolvers of its own the operator says where answers are seen: the zone's
		// authoritative servers may not be reachable from here by their NS names.
		if err := client.Challenge.SetDNS01Provider(dp, dns01.CondOptions(len(cfg.resolvers) > 0, dns01.DisableAuthoritativeNssPropagationRequirement())); err != nil {
			return nil, nil, err
		}
	case challengeHTTP01:
		if err := client.Challenge.SetHTTP01Provider(http01.NewProviderServer(cfg.http01Host, cfg.http01Port)); err != nil {
			return nil, nil, err
		}
	}
	res, err := client.Certificate.Obtain(ctx, certificate.ObtainRequest{Domains: r.domains, Bundle: true, KeyType: cfg.keyType})
	if err != nil {
		return nil, nil, caError(err, "ordering the certificate", r.domains, "request/domains")
	}
	return res, accountPEM, nil
}

func result(cfg *config, chain []byte, leaf *x509.Certificate, keyPEM, accountPEM []byte) (resource.Result, error) {
	issuer := leaf.Issuer.CommonName
	if len(issuer) > maxIssuer {
		issuer = issuer[:maxIssuer]
	}
	data, err := json.Marshal(contract.TLSResult{
		Certificate: string(chain),
		Key:         contract.SecretRef{Secret: keySecret},
		NotAfter:    leaf.NotAfter.UTC().Format(time.RFC3339),
		Issuer:      issuer,
		RenewAfter:  renewAfter(cfg, leaf).UTC().Format(time.RFC3339),
		CA:          cfg.issuerRoot,
	})
	if err != nil {
		return resource.Result{}, err
	}
	return resource.Result{Data: data, Secrets: map[string][]byte{keySecret: keyPEM, accountKeySecret: accountPEM}}, nil
}

func (p *provider) issuedPath(tenant, instance string) string {
	return filepath.Join(p.dir, issuedDir, tenant, instance+".json")
}

// Deprovision forgets the instance's certificate, so the next provision orders a new
// one. It revokes nothing: a removed deployment's certificate expires by itself, and
// revoking would need the account key, which only the host holds (in the secret
// resource that goes with this one).
func (p *provider) Deprovision(_ context.Context, req resource.DeprovisionRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == "" {
		return sdk.Invalid("settings", "the plugin has no settings: configure it first")
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

// parseLeaf returns the first certificate of a PEM chain.
func parseLeaf(chain []byte) (*x509.Certificate, error) {
	for rest := chain; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no certificate in the chain")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

var (
	_ resource.Provider  = (*provider)(nil)
	_ resource.Validator = (*provider)(nil)
	_ sdk.Configurer     = (*provider)(nil)
)
