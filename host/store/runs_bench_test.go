package store_test

import (
	"context"
	"testing"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
)

// BenchmarkStartRun is what taking a node costs a run between its worker's start and its
// command's (StartRun alone: the run is created and ended outside the timer).
func BenchmarkStartRun(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			cfg := store.Config{Database: "sqlite", DataDir: b.TempDir()}
			if db == "postgres" {
				cfg = store.Config{Database: pgtest.DSN(b)}
			}
			ctx := context.Background()
			st := open(b, cfg)
			d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "bench", Config: "{}"})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				r, err := st.CreateRun(ctx, store.Run{DeploymentID: d.ID, App: "miniflux", Operation: "refresh-feeds", Exclusive: true,
					Actor: "bench", Trigger: store.RunManual, Input: "{}"})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := st.StartRun(ctx, r.ID, "web", int64(i)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := st.FinishRun(ctx, r.ID, store.RunEnd{State: store.RunSucceeded}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
