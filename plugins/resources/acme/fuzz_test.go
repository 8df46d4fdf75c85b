package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fedhost/fedhost/plugins/resources/internal/hostname"
	"github.com/fedhost/fedhost/sdk"
)

// A tls request comes from an app's manifest and a deployment's settings: whatever its
// bytes, parseRequest returns a checked request or an invalid_request naming a field
// under request, and never panics.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"domains":["feeds.acme.example"],"dns":{"server":"192.0.2.1:53","key_name":"main.t.fedhost.","algorithm":"hmac-sha256","secret":{"secret":"tsig-secret"}}}`), false)
	f.Add([]byte(`{"domains":["feeds.acme.example"],"challenge":"http-01"}`), true)
	f.Add([]byte(`{"domains":["*.acme.example","10.0.0.1"],"challenge":"dns-01"}`), false)
	f.Fuzz(func(t *testing.T, spec []byte, listener bool) {
		r, err := parseRequest(json.RawMessage(spec), listener)
		if err != nil {
			if sdk.CodeOf(err) != sdk.CodeInvalid || !strings.HasPrefix(sdk.FieldOf(err), "request") {
				t.Fatalf("%v: not an invalid_request naming a field of the request", err)
			}
			return
		}
		for _, d := range r.domains {
			if hostname.Check(d) != nil {
				t.Fatalf("a name that is not a host name passed")
			}
		}
		if r.challenge == challengeDNS01 && r.dns == nil || r.challenge == challengeHTTP01 && !listener {
			t.Fatalf("a challenge the request cannot be answered with passed: %s", r.challenge)
		}
	})
}
