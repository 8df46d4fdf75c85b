package store_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/scalegen"
)

// BenchmarkScaleQueries measures, on PostgreSQL holding FEDHOST_SCALE_DEPLOYMENTS deployments
// made by internal/scalegen (10,000 by default), the reads that grew with the deployments
// before the scale fixes, the old way and the new side by side in one run: an operator's
// first page of deployments without and with the deployments_owner index, the jobs page's
// newest builds without and with builds_created_at, its deployments read all or by ID, and
// an operator's own audit events by walking the trail, with one OR, or through the two
// indexes merged.
func BenchmarkScaleQueries(b *testing.B) {
	ctx := context.Background()
	n := 10000
	if v := os.Getenv("FEDHOST_SCALE_DEPLOYMENTS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, "FEDHOST_SCALE_DEPLOYMENTS: give a number of deployments")
	}
	dsn := pgtest.DSN(b)
	f, err := scalegen.Fill(ctx, dsn, scalegen.Options{Deployments: n})
	require.NoError(b, err)
	st, err := store.Open(ctx, store.Config{Database: dsn})
	require.NoError(b, err)
	defer st.Close()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(b, err)
	defer conn.Close(ctx)
	exec := func(sql string) {
		_, err := conn.Exec(ctx, sql)
		require.NoError(b, err)
	}
	// without runs bench with index dropped, then puts it back.
	without := func(index, create string, bench func(*testing.B)) func(*testing.B) {
		return func(b *testing.B) {
			exec("DROP INDEX " + index)
			exec("ANALYZE")
			defer func() { exec(create); exec("ANALYZE") }()
			bench(b)
		}
	}

	operatorPage := func(b *testing.B) {
		for b.Loop() {
			list, err := st.ListDeploymentSummaries(ctx, f.OperatorID, "", 50)
			require.NoError(b, err)
			require.NotEmpty(b, list)
		}
	}
	b.Run("operator-page/before", without("deployments_owner", "CREATE INDEX deployments_owner ON deployments (owner, id)", operatorPage))
	b.Run("operator-page/after", operatorPage)

	newestBuilds := func(b *testing.B) {
		for b.Loop() {
			list, err := st.ListAllBuilds(ctx, 200)
			require.NoError(b, err)
			require.Len(b, list, 200)
		}
	}
	b.Run("newest-builds/before", without("builds_created_at", "CREATE INDEX builds_created_at ON builds (created_at, id)", newestBuilds))
	b.Run("newest-builds/after", newestBuilds)

	builds, err := st.ListAllBuilds(ctx, 200)
	require.NoError(b, err)
	ids := make([]string, 0, len(builds))
	for _, x := range builds {
		ids = append(ids, x.DeploymentID)
	}
	b.Run("jobs-deployments/before", func(b *testing.B) {
		for b.Loop() {
			list, err := st.ListDeployments(ctx, "")
			require.NoError(b, err)
			require.Len(b, list, n)
		}
	})
	b.Run("jobs-deployments/after", func(b *testing.B) {
		for b.Loop() {
			byID, err := st.DeploymentSummariesByID(ctx, ids)
			require.NoError(b, err)
			require.NotEmpty(b, byID)
		}
	})

	// The operator's first 200 events, as GET /api/v1/me/audit-events answers.
	b.Run("own-audit-events/before", func(b *testing.B) {
		for b.Loop() {
			var out []store.AuditEvent
			var after int64
			for len(out) < 200 {
				rows, err := st.AuditEvents(ctx, after, 1000)
				require.NoError(b, err)
				if len(rows) == 0 {
					break
				}
				for _, r := range rows {
					after = r.Seq
					if (r.Actor == f.OperatorID || r.Subject == f.OperatorID) && len(out) < 200 {
						out = append(out, r)
					}
				}
			}
			require.NotEmpty(b, out)
		}
	})
	b.Run("own-audit-events/or", func(b *testing.B) {
		for b.Loop() {
			// The first version of the new read: one WHERE with an OR.
			rows, err := conn.Query(ctx, `SELECT * FROM audit_events WHERE seq > 0 AND (actor = $1 OR subject = $1) ORDER BY seq LIMIT 200`, f.OperatorID)
			require.NoError(b, err)
			got := 0
			for rows.Next() {
				got++
			}
			require.NoError(b, rows.Err())
			require.NotZero(b, got)
		}
	})
	b.Run("own-audit-events/after", func(b *testing.B) {
		for b.Loop() {
			out, err := st.UserAuditEventsAfter(ctx, f.OperatorID, 0, 200)
			require.NoError(b, err)
			require.NotEmpty(b, out)
		}
	})
}
