package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fedhost/fedhost/sdk/resource"
)

// The request of the benchmarks: two buckets, one with CORS, and two keys.
var benchSpec = json.RawMessage(`{"buckets": {"media": {"cors": [{"allowed_origins": ["*"], "allowed_methods": ["GET"]}]}, "backups": {"backup": true}},
  "keys": {"app": {"grants": {"media": "write"}}, "backup": {"grants": {"backups": "write", "media": "read"}}}}`)

func BenchmarkProvision(b *testing.B) {
	ctx := context.Background()
	p := newProvider(b)
	prefix := uniqueTenant("bp")
	for i := 0; b.Loop(); i++ {
		tenant := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "s3", Spec: benchSpec}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "s3", Spec: benchSpec})
		})
	}
}

func BenchmarkDeprovision(b *testing.B) {
	ctx := context.Background()
	p := newProvider(b)
	prefix := uniqueTenant("bd")
	for i := 0; b.Loop(); i++ {
		tenant := fmt.Sprintf("%s-%d", prefix, i)
		b.StopTimer()
		if _, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "s3", Spec: benchSpec}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "s3", Spec: benchSpec}); err != nil {
			b.Fatal(err)
		}
	}
}
