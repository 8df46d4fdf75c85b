package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
)

// The tls rows written before migrateTickDue get their renew_after from their results,
// page after page: a certificate's renew_after, the epoch for one that gives none, none
// for a row without a certificate.
func TestMigrationSetsRenewAfter(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgresql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := Config{Database: "sqlite", DataDir: t.TempDir()}
			if db == "postgresql" {
				cfg = Config{Database: pgtest.DSN(t)}
			}
			st, err := Open(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			d, err := st.CreateDeployment(ctx, Deployment{Namespace: "acme", State: "active", Config: "{}"})
			require.NoError(t, err)
			due := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
			for i := range 1100 {
				result := fmt.Sprintf(`{"certificate":"pem","renew_after":%q}`, due.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
				switch i % 100 {
				case 1:
					result = `{"certificate":"pem","not_after":"2026-06-01T00:00:00Z"}`
				case 2:
					result = `{"host":"127.0.0.1"}`
				}
				require.NoError(t, st.db.Create(&Resource{DeploymentID: d.ID, Name: fmt.Sprintf("cert-%04d", i), Type: "tls", Spec: "{}", Result: result, State: ResourceProvisioned, UpdatedAt: now()}).Error)
			}
			var unset int64
			require.NoError(t, st.db.Model(&Resource{}).Where("renew_after IS NULL").Count(&unset).Error)
			require.EqualValues(t, 1100, unset, "written as before the migration")

			require.NoError(t, st.db.Transaction(setRenewAfter))
			var rows []Resource
			require.NoError(t, st.db.Order("name").Find(&rows).Error)
			require.Len(t, rows, 1100)
			for i, r := range rows {
				switch i % 100 {
				case 1:
					require.True(t, r.RenewAfter.Equal(time.Unix(0, 0)), "row %d", i)
				case 2:
					require.Nil(t, r.RenewAfter, "row %d", i)
				default:
					require.NotNil(t, r.RenewAfter, "row %d", i)
					require.True(t, r.RenewAfter.Equal(due.Add(time.Duration(i)*time.Second)), "row %d: %s", i, r.RenewAfter)
				}
			}
		})
	}
}
