package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
)

// clusterBuilds is how many builds each side of BenchmarkClusterThroughput runs.
const clusterBuilds = 24

// BenchmarkClusterThroughput is build throughput with one `fedhost serve` against three on
// one PostgreSQL (issue 16), side by side in one run: each iteration starts one host on a
// database of its own and submits clusterBuilds first builds of the hello app (its
// database on the embedded default, its node on `local`) to it, then does the same with
// three hosts on another database, the submits spread over them; builds/s is the builds
// over the time from the first submit to the last build's verdict. Each host runs its
// default 4 builds at once. The hosts of one side are stopped before the other starts.
func BenchmarkClusterThroughput(b *testing.B) {
	plugins := helloDirs(b)
	hcl := filepath.Join(b.TempDir(), "fedhost.hcl")
	require.NoError(b, os.WriteFile(hcl, []byte("app \"hello\" {\n  settings = { footer = \"Hosted by Example\" }\n}\n"), 0o600))
	config := func(name string) map[string]any {
		return map[string]any{"domain": name + ".example.org", "apps": map[string]any{
			"hello": map[string]any{"enable": true, "options": map[string]any{"greeting": "Hello from " + name}}}}
	}
	side := func(iteration, n int) (perSecond float64, spread string) {
		dsn := pgtest.DSN(b)
		hosts := make([]*host, n)
		for i := range hosts {
			hosts[i] = startHost(b, "FEDHOST_DATABASE="+dsn, "FEDHOST_PLUGIN_DIR="+plugins, "FEDHOST_CONFIG="+hcl)
		}
		var wg sync.WaitGroup
		defer func() {
			for _, h := range hosts {
				wg.Go(h.stop)
			}
			wg.Wait()
		}()
		ids := make([]string, clusterBuilds)
		for i := range ids {
			ids[i] = hosts[i%n].create(fmt.Sprintf("tp%d-%d-%d", iteration, n, i)).ID
		}
		start := time.Now()
		builds := make([]string, clusterBuilds)
		for i, id := range ids {
			builds[i] = hosts[i%n].submit(id, config(fmt.Sprintf("tp%d-%d-%d", iteration, n, i))).ID
		}
		var last time.Time
		for i, id := range builds {
			done := hosts[i%n].wait(id)
			require.Equal(b, "succeeded", done.State, "%+v", done)
			if end := done.Events[len(done.Events)-1].Time; end.After(last) {
				last = end
			}
		}
		took := last.Sub(start)

		// Which host ran the builds: River's last attempt of each build job.
		ctx := context.Background()
		db, err := pgx.Connect(ctx, dsn)
		require.NoError(b, err)
		defer db.Close(ctx)
		rows, err := db.Query(ctx, `SELECT attempted_by[array_upper(attempted_by, 1)], count(*) FROM river_job WHERE kind = 'build' GROUP BY 1`)
		require.NoError(b, err)
		byHost := map[int]int{}
		for rows.Next() {
			var client string
			var count int
			require.NoError(b, rows.Scan(&client, &count))
			for i, h := range hosts {
				if strings.HasSuffix(client, ":"+h.dataDir) {
					byHost[i] += count
				}
			}
		}
		require.NoError(b, rows.Err())
		var parts []string
		for i := range hosts {
			parts = append(parts, fmt.Sprint(byHost[i]))
		}
		sort.Strings(parts)
		return float64(clusterBuilds) / took.Seconds(), strings.Join(parts, "/")
	}

	var one, three []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r1, _ := side(i, 1)
		r3, spread := side(i, 3)
		one, three = append(one, r1), append(three, r3)
		fmt.Printf("cluster throughput: %d builds, 1 host %.2f builds/s, 3 hosts %.2f builds/s (builds per host %s), ratio %.2f\n",
			clusterBuilds, r1, r3, spread, r3/r1)
	}
	b.StopTimer()
	m1, m3 := medianOf(one), medianOf(three)
	b.ReportMetric(m1, "builds/s-1host")
	b.ReportMetric(m3, "builds/s-3hosts")
	b.ReportMetric(m3/m1, "ratio")
}

func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
