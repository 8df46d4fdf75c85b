package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

// The failed logins kept are bounded: a purge forgets the keys quiet for the window,
// then the longest quiet beyond the most kept; a key kept still waits.
func TestPurgeLoginFailuresBoundsTheTable(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		p := store.Throttle{Free: 1, Base: time.Second, Max: time.Minute, Window: time.Hour}
		start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		for i := range 10 {
			wait, err := st.ChargeLoginFailure(ctx, p, fmt.Sprint("k", i), start.Add(time.Duration(i)*time.Minute))
			require.NoError(t, err)
			require.Zero(t, wait)
		}
		at := start.Add(time.Hour + 2*time.Minute + time.Second)
		require.NoError(t, st.PurgeLoginFailures(ctx, time.Hour, 4, at))
		// k0 to k2 are older than the window; of k3 to k9, the four newest stay. A second
		// try at once waits 2s for a key kept (its second failure) and 1s for one forgotten.
		for i := range 10 {
			key := fmt.Sprint("k", i)
			wait, err := st.ChargeLoginFailure(ctx, p, key, at)
			require.NoError(t, err)
			require.Zero(t, wait, "%s: its wait after one failure has passed", key)
			wait, err = st.ChargeLoginFailure(ctx, p, key, at)
			require.NoError(t, err)
			want := time.Second
			if i >= 6 {
				want = 2 * time.Second
			}
			require.Equal(t, want, wait, "%s", key)
		}
	})
}

// BenchmarkChargeLoginFailure is the cost the shared throttle adds to a login: one upsert
// per try (two for a try that passes both throttles), on each database.
func BenchmarkChargeLoginFailure(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			cfg := store.Config{Database: "sqlite", DataDir: b.TempDir()}
			if db == "postgres" {
				cfg = store.Config{Database: pgtest.DSN(b)}
			}
			st := storetest.Open(b, cfg)
			ctx := context.Background()
			p := store.Throttle{Free: 5, Base: time.Second, Max: 15 * time.Minute, Window: time.Hour}
			at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
			for i := 0; b.Loop(); i++ {
				if _, err := st.ChargeLoginFailure(ctx, p, fmt.Sprint("client 192.0.2.", i%200), at.Add(time.Duration(i)*time.Hour)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
