package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/fedhost/fedhost/sdk/resource"
)

// benchProvider is a provider on the test slapd, for benchmarks.
func benchProvider(b *testing.B) *provider {
	p := &provider{}
	if err := p.Configure(context.Background(), settingsJSON()); err != nil {
		b.Fatal(err)
	}
	return p
}

var benchSpec = []byte(`{"groups":["editors","readers"]}`)

// BenchmarkProvision measures a first provision: the subtree, its users and groups
// entries, two groups, the bind account and its password (the deprovision after each
// is not timed).
func BenchmarkProvision(b *testing.B) {
	p, ctx := benchProvider(b), context.Background()
	for i := 0; i < b.N; i++ {
		tenant := fmt.Sprintf("benchp%d", i)
		if _, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "dir", Type: "ldap", Spec: benchSpec}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "dir", Type: "ldap"}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkDeprovision measures deleting such a subtree, leaf first (the provision
// before each is not timed).
func BenchmarkDeprovision(b *testing.B) {
	p, ctx := benchProvider(b), context.Background()
	for i := 0; i < b.N; i++ {
		tenant := fmt.Sprintf("benchd%d", i)
		b.StopTimer()
		if _, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "dir", Type: "ldap", Spec: benchSpec}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "dir", Type: "ldap"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProvisionAgain measures a provision that finds everything in place: the
// host's reconcile of an unchanged deployment.
func BenchmarkProvisionAgain(b *testing.B) {
	p, ctx := benchProvider(b), context.Background()
	req := resource.Request{Tenant: "benchagain", Instance: "dir", Type: "ldap", Spec: benchSpec}
	res, err := p.Provision(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: "ldap"})
	req.Secrets = res.Secrets
	for b.Loop() {
		if _, err := p.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
