package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkProvisionNode is a first provision of the test node on the Incus test server
// (volume, instance, files, start, until its health check passes through the proxy
// device) and its deprovision, through the plugin over gRPC; with the server's
// operations ending at once, and after 20 ms each.
func BenchmarkProvisionNode(b *testing.B) {
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		b.Run(fmt.Sprintf("operation=%s", delay), func(b *testing.B) {
			srv.SetOperationDelay(delay)
			b.Cleanup(func() { srv.SetOperationDelay(20 * time.Millisecond) })
			rc := start(b, settingsJSON(nil))
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				req := resource.Request{Tenant: "bench", Instance: fmt.Sprintf("n%d", i), Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
				if _, err := rc.Provision(ctx, req); err != nil {
					b.Fatal(err)
				}
				if err := rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance, Spec: req.Spec}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProvisionUnchanged is a provision of a running node's same spec: one GET of
// the instance and one health check.
func BenchmarkProvisionUnchanged(b *testing.B) {
	rc := start(b, settingsJSON(nil))
	ctx := context.Background()
	req := resource.Request{Tenant: "bench", Instance: "same", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	if _, err := rc.Provision(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance, Spec: req.Spec})
	})
	for b.Loop() {
		if _, err := rc.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
