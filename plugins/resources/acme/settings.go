package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/go-acme/lego/v5/certcrypto"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "dir": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Directory of the issued chains; the plugin's data directory when unset"},
    "directory_url": {"type": "string", "minLength": 9, "maxLength": 2048, "pattern": "^https://", "description": "The ACME directory of the CA (https), e.g. https://acme-v02.api.letsencrypt.org/directory"},
    "email": {"type": "string", "minLength": 3, "maxLength": 254, "description": "Contact address given to the CA with each account; none when unset"},
    "ca_certificates": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "PEM file of CA certificates trusted for the ACME server's TLS, besides the system's (a private CA, pebble)"},
    "issuer_root": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "PEM file of the root certificate the CA's chains end at, when it is private (pebble, a company CA): handed on in each result (ca) for the deployment's nodes to trust; unset for a public CA"},
    "resolvers": {"type": "array", "items": {"type": "string", "minLength": 3, "maxLength": 300}, "minItems": 1, "maxItems": 8, "description": "host:port of the DNS servers asked whether a DNS-01 answer is published; when set, the zone's authoritative servers are not asked directly. Default the system's resolvers, then each authoritative server"},
    "renew_before_days": {"type": "integer", "minimum": 1, "maximum": 365, "description": "A certificate is renewed this many days before it expires; default 30"},
    "http01_address": {"type": "string", "minLength": 2, "maxLength": 300, "description": "host:port the plugin listens on while it answers an HTTP-01 challenge (the CA connects to port 80 of each name: forward it here); without it, http-01 requests are refused"},
    "key_type": {"enum": ["ec256", "ec384", "rsa2048"], "description": "Key of each certificate; default ec256"},
    "timeout_seconds": {"type": "integer", "minimum": 5, "maximum": 3600, "description": "How long one issuance may take, challenges and DNS propagation included; default 300"}
  },
  "required": ["directory_url"],
  "additionalProperties": false
}`)

type settings struct {
	Dir             string   `json:"dir"`
	DirectoryURL    string   `json:"directory_url"`
	Email           string   `json:"email"`
	CACertificates  string   `json:"ca_certificates"`
	IssuerRoot      string   `json:"issuer_root"`
	Resolvers       []string `json:"resolvers"`
	RenewBeforeDays int      `json:"renew_before_days"`
	HTTP01Address   string   `json:"http01_address"`
	KeyType         string   `json:"key_type"`
	TimeoutSeconds  int      `json:"timeout_seconds"`
}

// config is the checked settings.
type config struct {
	dir          string
	directoryURL string
	email        string
	httpClient   *http.Client
	resolvers    []string
	renewBefore  time.Duration
	http01Host   string
	http01Port   string
	keyType      certcrypto.KeyType
	timeout      time.Duration
	// issuerRoot is the private root the chains end at (PEM), or empty.
	issuerRoot string
}

var keyTypes = map[string]certcrypto.KeyType{"": certcrypto.EC256, "ec256": certcrypto.EC256, "ec384": certcrypto.EC384, "rsa2048": certcrypto.RSA2048}

// parseSettings checks the settings without reaching the CA: one that is down now is
// reported by the first provision.
func parseSettings(raw json.RawMessage) (*config, error) {
	var s settings
	if len(raw) == 0 {
		return nil, sdk.Invalid("settings/directory_url", "no settings: give directory_url, the https address of the CA's ACME directory")
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, sdk.Invalid("settings", "settings are not an object of the plugin's schema: %v", err)
	}
	u, err := url.Parse(s.DirectoryURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || len(s.DirectoryURL) > 2048 {
		return nil, sdk.Invalid("settings/directory_url", "not an https URL: give the CA's ACME directory, e.g. https://acme-v02.api.letsencrypt.org/directory")
	}
	c := &config{dir: s.Dir, directoryURL: s.DirectoryURL, email: s.Email, renewBefore: 30 * 24 * time.Hour, timeout: 300 * time.Second}
	if len(s.Email) > 254 {
		return nil, sdk.Invalid("settings/email", "longer than 254 characters: give one mailbox")
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if s.CACertificates != "" {
		b, err := os.ReadFile(s.CACertificates)
		if err != nil {
			return nil, sdk.Invalid("settings/ca_certificates", "reading the file: %v", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, sdk.Invalid("settings/ca_certificates", "the file holds no PEM certificate: give the CA certificate(s) the ACME server's TLS certificate chains to")
		}
	}
	if s.IssuerRoot != "" {
		if c.issuerRoot, err = readRoot(s.IssuerRoot); err != nil {
			return nil, err
		}
	}
	c.httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
	}}
	for i, r := range s.Resolvers {
		if _, port, err := net.SplitHostPort(r); err != nil || port == "" {
			return nil, sdk.Invalid(fmt.Sprintf("settings/resolvers/%d", i), "not host:port: give a DNS server's address with its port, e.g. 127.0.0.1:53")
		}
	}
	c.resolvers = s.Resolvers
	if s.RenewBeforeDays != 0 {
		if s.RenewBeforeDays < 1 || s.RenewBeforeDays > 365 {
			return nil, sdk.Invalid("settings/renew_before_days", "%d is not between 1 and 365", s.RenewBeforeDays)
		}
		c.renewBefore = time.Duration(s.RenewBeforeDays) * 24 * time.Hour
	}
	if s.HTTP01Address != "" {
		host, port, err := net.SplitHostPort(s.HTTP01Address)
		if err != nil || port == "" {
			return nil, sdk.Invalid("settings/http01_address", "not host:port: give the address to listen on for HTTP-01 challenges, e.g. :80 or 127.0.0.1:8402")
		}
		c.http01Host, c.http01Port = host, port
	}
	kt, ok := keyTypes[s.KeyType]
	if !ok {
		return nil, sdk.Invalid("settings/key_type", "not a key type of this plugin: give ec256, ec384 or rsa2048")
	}
	c.keyType = kt
	if s.TimeoutSeconds != 0 {
		if s.TimeoutSeconds < 5 || s.TimeoutSeconds > 3600 {
			return nil, sdk.Invalid("settings/timeout_seconds", "%d is not between 5 and 3600", s.TimeoutSeconds)
		}
		c.timeout = time.Duration(s.TimeoutSeconds) * time.Second
	}
	return c, nil
}

// readRoot reads the one CA certificate of the issuer_root file, as PEM.
func readRoot(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", sdk.Invalid("settings/issuer_root", "reading the file: %v", err)
	}
	block, rest := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) > 0 {
		return "", sdk.Invalid("settings/issuer_root", "the file does not hold one PEM certificate: give the CA's root certificate alone")
	}
	root, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !root.IsCA {
		return "", sdk.Invalid("settings/issuer_root", "the file's certificate is not a CA certificate: give the root the CA's chains end at")
	}
	return string(pem.EncodeToMemory(block)), nil
}
