package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// maxDomains bounds a request's names, as public CAs do (Let's Encrypt: 100).
const maxDomains = 100

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// domains decodes a tls request and checks that each name is a DNS name a certificate
// may carry: lower case, labels of at most 63 characters, at most 253 in all, not an IP
// address, a wildcard only as the whole leftmost label over at least two more.
func domains(spec json.RawMessage) ([]string, error) {
	var req contract.TLSRequest
	if err := json.Unmarshal(spec, &req); err != nil {
		return nil, sdk.Invalid("request", "the tls request is not an object with a domains array: %v", err)
	}
	if len(req.Domains) == 0 {
		return nil, sdk.Invalid("request/domains", "no domains: name at least one host name the certificate is for")
	}
	if len(req.Domains) > maxDomains {
		return nil, sdk.Invalid("request/domains", "%d domains: a certificate carries at most %d; split them over several tls resources", len(req.Domains), maxDomains)
	}
	seen := map[string]bool{}
	for i, d := range req.Domains {
		field := fmt.Sprintf("request/domains/%d", i)
		if err := checkName(d); err != nil {
			return nil, sdk.Invalid(field, "%s", err)
		}
		if seen[d] {
			return nil, sdk.Invalid(field, "the name is given twice; give each name once")
		}
		seen[d] = true
	}
	return req.Domains, nil
}

type nameError string

func (e nameError) Error() string { return string(e) }

func checkName(d string) error {
	if len(d) > 253 {
		return nameError(fmt.Sprintf("the name has %d characters; a DNS name has at most 253", len(d)))
	}
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return nameError("an IP address, not a DNS name: this provider issues certificates for host names only")
	}
	if d != strings.ToLower(d) {
		return nameError("write the name in lower case")
	}
	labels := strings.Split(d, ".")
	if labels[0] == "*" {
		if len(labels) < 3 {
			return nameError("a wildcard needs at least two labels under it (*.acme.example)")
		}
		labels = labels[1:]
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return nameError("not a DNS name: labels of letters, digits and inner dashes, 1 to 63 characters, separated by single dots; a wildcard only as the whole first label")
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return nameError("the last label is all digits, which no top-level domain is: an IP address is not a DNS name")
	}
	return nil
}
