package main

import (
	"context"
	"testing"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

func benchRequest(tenant string) resource.Request {
	zone := tenant + ".bench.test"
	return resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: requestFor(zone,
		contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.10"},
		contract.DNSRecord{Name: "feeds", Type: "AAAA", Value: "2001:db8::10"},
		contract.DNSRecord{Name: "_acme-challenge.feeds", Type: "TXT", Value: "token"})}
}

// BenchmarkProvision measures the first Provision of a zone with three records on the
// real server: key, reconfig, addzone, update, and the wait until it is answered.
func BenchmarkProvision(b *testing.B) {
	p := setup(b)
	ctx := context.Background()
	var made []resource.Request
	for b.Loop() {
		req := benchRequest(newTenant())
		if _, err := p.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
		made = append(made, req)
	}
	b.StopTimer()
	for _, req := range made {
		_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: req.Type, Spec: req.Spec})
	}
}

// BenchmarkReprovision measures a Provision that changes nothing.
func BenchmarkReprovision(b *testing.B) {
	p := setup(b)
	ctx := context.Background()
	req := benchRequest(newTenant())
	res, err := p.Provision(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	req.Secrets = res.Secrets
	for b.Loop() {
		if _, err := p.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: req.Type, Spec: req.Spec})
}

// BenchmarkDeprovision measures the Deprovision of a zone with three records: delzone,
// the wait until it is gone, and the key's removal with a reconfig.
func BenchmarkDeprovision(b *testing.B) {
	p := setup(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		req := benchRequest(newTenant())
		if _, err := p.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: req.Type, Spec: req.Spec}); err != nil {
			b.Fatal(err)
		}
	}
}
