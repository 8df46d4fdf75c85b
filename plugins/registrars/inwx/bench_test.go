package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fedhost/fedhost/plugins/registrars/inwx/internal/inwxtest"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// benchDriver starts the plugin for the DomRobot test server, as the tests do.
func benchDriver(b *testing.B) (*registrar.Client, *inwxtest.Server) {
	srv := inwxtest.Start(user, password)
	b.Cleanup(srv.Close)
	dir := b.TempDir()
	uf, pf := dir+"/user", dir+"/password"
	writeFile(b, uf, user)
	writeFile(b, pf, password)
	raw, _ := json.Marshal(map[string]any{"base_url": srv.URL(), "username_file": uf, "password_file": pf, "poll_milliseconds": 10})
	ctx := context.Background()
	p, err := client.Start(ctx, binary)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Kill)
	if err := p.Configure(ctx, raw); err != nil {
		b.Fatal(err)
	}
	return p.Registrar(), srv
}

// BenchmarkCheck is one availability and price check from the host: gRPC to the plugin,
// domain.check and domain.getPrices over one session.
func BenchmarkCheck(b *testing.B) {
	reg, _ := benchDriver(b)
	ctx := context.Background()
	if _, err := reg.Check(ctx, "acme.test"); err != nil { // logs in
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := reg.Check(ctx, "acme.test"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegisterPending is a registration the registry keeps pending for two reads,
// followed to its end at the shortest poll (10 ms): how much the following adds.
func BenchmarkRegisterPending(b *testing.B) {
	reg, srv := benchDriver(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	owner, err := reg.PutContact(ctx, ada)
	if err != nil {
		b.Fatal(err)
	}
	srv.PendingPolls(2)
	i := 0
	for b.Loop() {
		i++
		d, err := reg.Register(ctx, registrar.RegisterRequest{Domain: "bench-" + itoa(i) + ".test", OwnerContact: owner.ID})
		if err != nil || d.Status != registrar.StatusActive {
			b.Fatal(d, err)
		}
	}
}
