package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkProvision measures a provision of a new node, from the call to its first
// passing health check.
func BenchmarkProvision(b *testing.B) {
	bd := setup(b, b.TempDir(), "")
	ctx := context.Background()
	spec := nodeSpec(nil)
	b.ResetTimer()
	for i := range b.N {
		tenant := fmt.Sprintf("bench-%d", i)
		if _, err := bd.rc.Provision(ctx, resource.Request{Tenant: tenant, Instance: "web", Type: contract.Instance, Spec: spec, Secrets: testSecrets}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := bd.rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "web", Type: contract.Instance}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkDeprovision measures the stop (SIGTERM) and removal of a running node.
func BenchmarkDeprovision(b *testing.B) {
	bd := setup(b, b.TempDir(), "")
	ctx := context.Background()
	spec := nodeSpec(nil)
	b.ResetTimer()
	for i := range b.N {
		tenant := fmt.Sprintf("bench-%d", i)
		b.StopTimer()
		if _, err := bd.rc.Provision(ctx, resource.Request{Tenant: tenant, Instance: "web", Type: contract.Instance, Spec: spec, Secrets: testSecrets}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := bd.rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "web", Type: contract.Instance}); err != nil {
			b.Fatal(err)
		}
	}
}
