package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkProvisionNode is a first provision of the test node on the test sshd until
// its health check passes, and its deprovision, through the plugin over gRPC.
func BenchmarkProvisionNode(b *testing.B) {
	rc := start(b, settingsJSON(b.TempDir(), ""))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		req := resource.Request{Tenant: "bench", Instance: fmt.Sprintf("n%d", i), Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
		if _, err := rc.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
		if err := rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProvisionUnchanged is a provision of a running node's same spec: one SSH
// session to inspect it and one health check.
func BenchmarkProvisionUnchanged(b *testing.B) {
	rc := start(b, settingsJSON(b.TempDir(), ""))
	ctx := context.Background()
	req := resource.Request{Tenant: "bench", Instance: "same", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	if _, err := rc.Provision(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance})
	})
	for b.Loop() {
		if _, err := rc.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProvisionMiniflux is a first provision of Miniflux on the test sshd, on a new
// empty database each time (its migrations and admin user included), until
// /healthcheck answers, and its deprovision.
func BenchmarkProvisionMiniflux(b *testing.B) {
	spec := minifluxSpec(b)
	rc := start(b, settingsJSON(b.TempDir(), ""))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		dsn := pgtest.DSN(b)
		b.StartTimer()
		req := resource.Request{Tenant: "bench", Instance: fmt.Sprintf("mf%d", i), Type: contract.Instance, Spec: spec,
			Secrets: map[string][]byte{"db": []byte(dsn), "admin": []byte(adminPassword)}}
		if _, err := rc.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
		if err := rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExec is a command (sh -c true) run in a running node, from the call to its
// exit status: two SSH sessions (the script, checked against the node's state, and the command).
func BenchmarkExec(b *testing.B) {
	rc := start(b, settingsJSON(b.TempDir(), ""))
	ctx := context.Background()
	req := resource.Request{Tenant: "bench", Instance: "exec", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	if _, err := rc.Provision(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance})
	})
	x := resource.ExecRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance, Binary: "sh", Args: []string{"-c", "true"}}
	for b.Loop() {
		res, err := rc.Exec(ctx, x, func(resource.ExecOutput) error { return nil })
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}
