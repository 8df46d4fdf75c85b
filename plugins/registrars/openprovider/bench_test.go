package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fedhost/fedhost/plugins/registrars/openprovider/internal/optest"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// benchDriver starts the plugin for the Openprovider test server, as the tests do.
func benchDriver(b *testing.B) (*registrar.Client, *optest.Server) {
	srv := optest.Start(user, password)
	b.Cleanup(srv.Close)
	dir := b.TempDir()
	uf, pf := dir+"/user", dir+"/password"
	for path, v := range map[string]string{uf: user, pf: password} {
		if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
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
// POST domains/check and two GET domains/prices with one token.
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
	i := 0
	for b.Loop() {
		i++
		name := "bench-" + strconv.Itoa(i) + ".test"
		srv.Pending(name, 2)
		d, err := reg.Register(ctx, registrar.RegisterRequest{Domain: name, OwnerContact: owner.ID})
		if err != nil || d.Status != registrar.StatusActive {
			b.Fatal(d, err)
		}
	}
}
