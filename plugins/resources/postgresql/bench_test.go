package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkProvision measures one Provision of a new role and database (with the citext
// extension) on the pgtest server, through a CREATEROLE/CREATEDB admin.
func BenchmarkProvision(b *testing.B) {
	p, _ := newSharedProvider(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		req := provisionReq("bench-prov", fmt.Sprintf("i%d", i), nil)
		req.Spec = []byte(`{"extensions":["citext"]}`)
		if _, err := p.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeprovision measures one Deprovision (drop) of a provisioned instance.
func BenchmarkDeprovision(b *testing.B) {
	p, _ := newSharedProvider(b)
	ctx := context.Background()
	for i := range b.N {
		if _, err := p.Provision(ctx, provisionReq("bench-deprov", fmt.Sprintf("i%d", i), nil)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "bench-deprov", Instance: fmt.Sprintf("i%d", i), Type: "postgresql"}); err != nil {
			b.Fatal(err)
		}
	}
}
