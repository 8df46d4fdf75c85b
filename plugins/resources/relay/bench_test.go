package main

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkRelayMessage submits one message per iteration through the relay (a new
// connection, AUTH, the header check) to mailpit, which the relay reaches on a new
// connection with its own AUTH: the whole path of an app's mail.
func BenchmarkRelayMessage(b *testing.B) {
	rc, _ := start(b, testSettings(b))
	a := provision(b, rc, "acme", "mail", spec("noreply", "acme.example"))
	m := submission{envelopeFrom: a.From, headerFrom: a.From, to: []string{"bench@people.test"}}
	for i := 0; b.Loop(); i++ {
		m.subject = fmt.Sprintf("bench-%d", i)
		require.NoError(b, send(addr(a), a.User, a.password, m))
	}
}

// BenchmarkRelayMessageParallel is BenchmarkRelayMessage from 8 clients at once.
func BenchmarkRelayMessageParallel(b *testing.B) {
	rc, _ := start(b, testSettings(b))
	a := provision(b, rc, "acme", "mail", spec("noreply", "acme.example"))
	b.SetParallelism(8 / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		m := submission{envelopeFrom: a.From, headerFrom: a.From, to: []string{"bench@people.test"}, subject: "bench-parallel"}
		for pb.Next() {
			if err := send(addr(a), a.User, a.password, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkLogin is a connection and AUTH PLAIN alone.
func BenchmarkLogin(b *testing.B) {
	rc, _ := start(b, testSettings(b))
	a := provision(b, rc, "acme", "mail", spec("noreply", "acme.example"))
	for b.Loop() {
		require.NoError(b, authenticate(addr(a), a.User, a.password))
	}
}

// BenchmarkProvision makes a new account per iteration through the plugin: the
// accounts file (every account so far) is written and synced each time.
func BenchmarkProvision(b *testing.B) {
	rc, _ := start(b, testSettings(b))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		_, err := rc.Provision(ctx, resource.Request{Tenant: fmt.Sprintf("t%d", i), Instance: "mail", Type: contract.SMTP, Spec: spec("noreply", fmt.Sprintf("t%d.example", i))})
		require.NoError(b, err)
	}
}

// BenchmarkMailpitDirect sends the same message straight to mailpit with the relay's
// upstream account: the floor BenchmarkRelayMessage is compared with.
func BenchmarkMailpitDirect(b *testing.B) {
	from := "noreply@acme.example"
	m := submission{envelopeFrom: from, headerFrom: from, to: []string{"bench@people.test"}}
	for i := 0; b.Loop(); i++ {
		m.subject = fmt.Sprintf("direct-%d", i)
		require.NoError(b, send(mailpit.SMTPAddr, upstreamUser, upstreamPassword, m))
	}
}
