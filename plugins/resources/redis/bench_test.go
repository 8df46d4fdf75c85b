package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkProvision measures one Provision of a new instance on the real server,
// including the persistence of the users (CONFIG REWRITE on the test server).
func BenchmarkProvision(b *testing.B) {
	p, _ := setup(b)
	ctx := context.Background()
	tenant := newTenant()
	n := 0
	for b.Loop() {
		_, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: fmt.Sprintf("i%d", n), Type: "redis"})
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.StopTimer()
	for k := range n {
		_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: fmt.Sprintf("i%d", k), Type: "redis"})
	}
}

// BenchmarkDeprovision measures one Deprovision of an instance holding 100 keys.
func BenchmarkDeprovision(b *testing.B) {
	p, admin := setup(b)
	ctx := context.Background()
	tenant := newTenant()
	n := 0
	for b.Loop() {
		b.StopTimer()
		inst := fmt.Sprintf("i%d", n)
		n++
		if _, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: inst, Type: "redis"}); err != nil {
			b.Fatal(err)
		}
		pipe := admin.Pipeline()
		for k := range 100 {
			pipe.Set(ctx, fmt.Sprintf("%s:%s:k%d", tenant, inst, k), "v", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: inst, Type: "redis"}); err != nil {
			b.Fatal(err)
		}
	}
}
