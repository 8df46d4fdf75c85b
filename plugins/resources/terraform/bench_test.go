package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkProvision provisions a new instance per iteration through the plugin: init
// against the host's state backend, plan, the plan's check, apply (psql makes the role and
// database) and the outputs. Each instance is deprovisioned outside the timer.
func BenchmarkProvision(b *testing.B) {
	h, pg := startHost(b), newPostgres(b)
	rc, _ := start(b, settingsFor(b, h, pg, "postgresql", nil), b.TempDir())
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		tenant := fmt.Sprintf("bench%d", i)
		_, err := rc.Provision(ctx, request(tenant, `{}`, nil))
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "db", Type: contract.PostgreSQL}))
		b.StartTimer()
	}
}

// BenchmarkProvisionAgain provisions one instance again with its secrets: init, a plan
// with no changes, the outputs; nothing is applied.
func BenchmarkProvisionAgain(b *testing.B) {
	h, pg := startHost(b), newPostgres(b)
	rc, _ := start(b, settingsFor(b, h, pg, "postgresql", nil), b.TempDir())
	ctx := context.Background()
	first, err := rc.Provision(ctx, request("again", `{}`, nil))
	require.NoError(b, err)
	b.Cleanup(func() {
		_ = rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "again", Instance: "db", Type: contract.PostgreSQL})
	})
	for b.Loop() {
		_, err := rc.Provision(ctx, request("again", `{}`, first.Secrets))
		require.NoError(b, err)
	}
}
