package main

import (
	"encoding/json"
	"fmt"
	"net"

	"github.com/fedhost/fedhost/plugins/resources/internal/hostname"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

const (
	challengeDNS01  = "dns-01"
	challengeHTTP01 = "http-01"
)

// request is a checked tls request.
type request struct {
	domains   []string
	challenge string
	dns       *contract.DNSUpdate
}

// parseRequest checks a tls request without the network: the names, and a challenge
// the request can be answered with. http01Listener says whether the settings give an HTTP-01
// listener.
func parseRequest(spec json.RawMessage, http01Listener bool) (request, error) {
	var req contract.TLSRequest
	if err := json.Unmarshal(spec, &req); err != nil {
		return request{}, sdk.Invalid("request", "the tls request is not an object of the tls schema: %v", err)
	}
	if len(req.Domains) == 0 {
		return request{}, sdk.Invalid("request/domains", "no domains: name at least one host name the certificate is for")
	}
	if len(req.Domains) > hostname.MaxDomains {
		return request{}, sdk.Invalid("request/domains", "%d domains: a certificate carries at most %d; split them over several tls resources", len(req.Domains), hostname.MaxDomains)
	}
	seen := map[string]bool{}
	for i, d := range req.Domains {
		field := fmt.Sprintf("request/domains/%d", i)
		if err := hostname.Check(d); err != nil {
			return request{}, sdk.Invalid(field, "%s", err)
		}
		if seen[d] {
			return request{}, sdk.Invalid(field, "the name is given twice; give each name once")
		}
		seen[d] = true
	}
	r := request{domains: req.Domains, challenge: req.Challenge, dns: req.DNS}
	if r.challenge == "" {
		r.challenge = challengeHTTP01
		if req.DNS != nil || !http01Listener {
			r.challenge = challengeDNS01
		}
	}
	switch r.challenge {
	case challengeDNS01:
		if req.DNS == nil {
			return request{}, sdk.Invalid("request/dns", "a dns-01 challenge needs the update key of the names' zone: give dns from a dns resource with update keys (the rfc2136 provider's update), or ask for http-01")
		}
		if _, port, err := net.SplitHostPort(req.DNS.Server); err != nil || port == "" {
			return request{}, sdk.Invalid("request/dns/server", "not host:port: give the zone's primary, as the dns result's update.server")
		}
		if req.DNS.KeyName == "" || len(req.DNS.KeyName) > 255 {
			return request{}, sdk.Invalid("request/dns/key_name", "give the TSIG key's name, as the dns result's update.key_name")
		}
		if req.DNS.Algorithm != "hmac-sha256" && req.DNS.Algorithm != "hmac-sha512" {
			return request{}, sdk.Invalid("request/dns/algorithm", "give hmac-sha256 or hmac-sha512, as the dns result's update.algorithm")
		}
		if req.DNS.Secret.Secret == "" {
			return request{}, sdk.Invalid("request/dns/secret/secret", "name the secret that holds the TSIG key, as the dns result's update.secret")
		}
	case challengeHTTP01:
		if !http01Listener {
			return request{}, sdk.Invalid("request/challenge", "http-01 needs a listener for the CA to reach: set http01_address in the plugin's settings, or ask for dns-01 with the zone's update key")
		}
		for i, d := range req.Domains {
			if d[0] == '*' {
				return request{}, sdk.Invalid(fmt.Sprintf("request/domains/%d", i), "a wildcard name can be validated by dns-01 alone: give dns, the zone's update key")
			}
		}
	default:
		return request{}, sdk.Invalid("request/challenge", "not a challenge of this provider: give dns-01 or http-01")
	}
	return r, nil
}
