package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

const (
	maxHosts       = 16
	maxHostLength  = 253
	maxUpstream    = 261
	maxCertificate = 65536
)

// parseRequest reads a route request and checks it without touching Caddy: the host
// names, the upstream and, with tls, that the certificate parses and covers every host.
// Host names come back in lower case, as Caddy matches them.
func parseRequest(spec json.RawMessage, now time.Time) (contract.RouteRequest, error) {
	var r contract.RouteRequest
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, sdk.Invalid("request", "the request is not a route request (hosts, upstream, tls): %v", err)
	}
	if len(r.Hosts) == 0 || len(r.Hosts) > maxHosts {
		return r, sdk.Invalid("request/hosts", "give from 1 to %d host names", maxHosts)
	}
	seen := map[string]bool{}
	for i, h := range r.Hosts {
		h = strings.ToLower(h)
		field := "request/hosts/" + strconv.Itoa(i)
		if !validHost(h) {
			return r, sdk.Invalid(field, "not a host name: give labels of letters, digits and hyphens separated by dots, at most %d characters, without a port or wildcard", maxHostLength)
		}
		if seen[h] {
			return r, sdk.Invalid(field, "host %s is given twice", h)
		}
		seen[h] = true
		r.Hosts[i] = h
	}
	if err := checkUpstream(r.Upstream); err != nil {
		return r, err
	}
	if r.TLS != nil {
		if _, err := checkCertificate(r.TLS.Certificate, r.Hosts, now); err != nil {
			return r, err
		}
		if r.TLS.Key.Secret == "" {
			return r, sdk.Invalid("request/tls/key/secret", "name the secret that holds the certificate's key")
		}
	}
	return r, nil
}

// validHost reports whether h is a DNS host name: labels of letters, digits and inner
// hyphens, each 1 to 63 characters.
func validHost(h string) bool {
	if h == "" || len(h) > maxHostLength {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return !strings.HasSuffix(h, ".")
}

func checkUpstream(u string) error {
	const field = "request/upstream"
	if len(u) > maxUpstream {
		return sdk.Invalid(field, "give host:port of at most %d characters", maxUpstream)
	}
	host, port, err := net.SplitHostPort(u)
	if err != nil || host == "" {
		return sdk.Invalid(field, "give host:port of the node's HTTP port, e.g. 127.0.0.1:8080")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return sdk.Invalid(field, "the port must be a number from 1 to 65535")
	}
	if net.ParseIP(host) == nil && !validHost(host) {
		return sdk.Invalid(field, "the host of the upstream is neither an IP address nor a host name")
	}
	return nil
}

// checkCertificate parses a PEM chain (the leaf first) and checks that the leaf is in
// its validity period and covers every host.
func checkCertificate(chain string, hosts []string, now time.Time) (*x509.Certificate, error) {
	const field = "request/tls/certificate"
	if len(chain) > maxCertificate {
		return nil, sdk.Invalid(field, "the chain is over %d bytes", maxCertificate)
	}
	var certs []*x509.Certificate
	rest := []byte(chain)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, sdk.Invalid(field, "the chain holds a PEM block of type %q: give certificates only (the key goes in the secret of tls.key)", truncate(b.Type, 40))
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, sdk.Invalid(field, "certificate %d of the chain does not parse: %v", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, sdk.Invalid(field, "no PEM certificate: give the chain as PEM, the leaf first")
	}
	leaf := certs[0]
	if now.After(leaf.NotAfter) {
		return nil, sdk.Invalid(field, "the certificate expired on %s: renew it", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return nil, sdk.Invalid(field, "the certificate is valid only from %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	for i, h := range hosts {
		if err := leaf.VerifyHostname(h); err != nil {
			return nil, sdk.Invalid("request/hosts/"+strconv.Itoa(i), "the certificate does not cover host %s: give a certificate whose names include it", h)
		}
	}
	return leaf, nil
}

// checkKey checks that keyPEM is the private key of the chain's leaf.
func checkKey(chain string, keyPEM []byte) error {
	if len(keyPEM) == 0 {
		return sdk.Invalid("request/tls/key", "the secret named by tls.key is missing or empty: the host passes its value in the request's secrets")
	}
	if _, err := tls.X509KeyPair([]byte(chain), keyPEM); err != nil {
		return sdk.Invalid("request/tls/key", "the key of tls.key is not a PEM private key of the certificate: give the key the certificate was issued for")
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// urls are the addresses of hosts as the front door serves them.
func urls(hosts []string, tlsOn bool, s settings) []string {
	scheme, port, standard := "http", s.HTTPPort, 80
	if tlsOn {
		scheme, port, standard = "https", s.HTTPSPort, 443
	}
	out := make([]string, len(hosts))
	for i, h := range hosts {
		if port != standard {
			h = net.JoinHostPort(h, strconv.Itoa(port))
		}
		out[i] = fmt.Sprintf("%s://%s/", scheme, h)
	}
	return out
}
