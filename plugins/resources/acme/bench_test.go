package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// An issuance by DNS-01 for two names of one zone, pebble's delays off: an order, two
// TSIG-signed updates to named and their propagation checks, two validations by pebble,
// finalize and download. The account exists (its key given back), as after the first.
func BenchmarkIssueDNS01(b *testing.B) {
	p := setup(b)
	zone, upd, tsig := newZone(b)
	spec := tlsRequest([]string{zone, "www." + zone}, "dns-01", upd)
	_, first := provision(b, p, "bench", spec, tsig)
	secrets := with(tsig, map[string][]byte{accountKeySecret: first[accountKeySecret]})
	b.ResetTimer()
	for i := range b.N {
		_, err := p.Provision(context.Background(), resource.Request{Tenant: "bench", Instance: fmt.Sprintf("i%d", i), Type: contract.TLS, Spec: spec, Secrets: secrets})
		require.NoError(b, err)
	}
}

// A provision again that changes nothing: the kept chain read, its key and names
// checked, no request to the CA.
func BenchmarkProvisionUnchanged(b *testing.B) {
	p := setup(b)
	zone, upd, tsig := newZone(b)
	spec := tlsRequest([]string{zone}, "dns-01", upd)
	_, secrets := provision(b, p, "bench", spec, tsig)
	req := resource.Request{Tenant: "bench", Instance: "main", Type: contract.TLS, Spec: spec, Secrets: with(tsig, secrets)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := p.Provision(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
