package main

import (
	"encoding/json"
	"fmt"

	"github.com/fedhost/fedhost/plugins/resources/internal/hostname"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// domains decodes a tls request and checks each name (hostname.Check).
func domains(spec json.RawMessage) ([]string, error) {
	var req contract.TLSRequest
	if err := json.Unmarshal(spec, &req); err != nil {
		return nil, sdk.Invalid("request", "the tls request is not an object with a domains array: %v", err)
	}
	if len(req.Domains) == 0 {
		return nil, sdk.Invalid("request/domains", "no domains: name at least one host name the certificate is for")
	}
	if len(req.Domains) > hostname.MaxDomains {
		return nil, sdk.Invalid("request/domains", "%d domains: a certificate carries at most %d; split them over several tls resources", len(req.Domains), hostname.MaxDomains)
	}
	seen := map[string]bool{}
	for i, d := range req.Domains {
		field := fmt.Sprintf("request/domains/%d", i)
		if err := hostname.Check(d); err != nil {
			return nil, sdk.Invalid(field, "%s", err)
		}
		if seen[d] {
			return nil, sdk.Invalid(field, "the name is given twice; give each name once")
		}
		seen[d] = true
	}
	return req.Domains, nil
}
