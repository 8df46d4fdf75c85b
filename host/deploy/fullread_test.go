package deploy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/sdk/contract"
)

// fullReadTick is the tick as it was before it asked the database for its candidates:
// every deployment, every tls, postgresql and s3 row and every backup record read, and
// the decisions made in Go. TestTickDecidesAsTheFullRead holds Tick to its decisions, and
// BenchmarkTickCandidates measures both.
func (e *Engine) fullReadTick(ctx context.Context, now time.Time) error {
	ds, err := e.opts.Store.ListDeployments(ctx, "")
	if err != nil {
		return err
	}
	_, uerr := e.runUpdates(ctx, now, ds)
	var rerr, berr, derr error
	if tls, err := e.opts.Store.ResultsOfType(ctx, contract.TLS); err != nil {
		rerr = err
	} else {
		_, rerr = e.runRenewals(ctx, now, ds, tls)
	}
	rows, err := e.opts.Store.ResourcesOfTypes(ctx, contract.PostgreSQL, contract.S3)
	records, err2 := e.opts.Store.AppBackups(ctx, "")
	if err != nil || err2 != nil {
		berr = errors.Join(err, err2)
	} else {
		_, berr = e.runBackups(ctx, now, ds, rows, records)
	}
	if records, err := e.opts.Store.AppBackups(ctx, ""); err != nil {
		derr = err
	} else {
		_, derr = e.runDrills(ctx, now, ds, records)
	}
	_, serr := e.runSchedules(ctx, now)
	domerr := e.runDomainRenewals(ctx, now)
	_, roleerr := e.runRoleSyncs(ctx, now, ds)
	xerr := e.runExportExpiry(ctx, now)
	return errors.Join(uerr, rerr, berr, derr, serr, domerr, roleerr, xerr)
}

// tickStore fills st with n deployments of every kind the tick tells apart, the same for
// the same seed: states (active, failed, suspended, exported, destroyed), apps with data
// and without a backup record, backups due and not, good backups drilled long ago,
// lately and never, certificates due, fresh, without a renew_after and without a
// certificate, and deployments with a build queued.
func tickStore(t testing.TB, st *store.Store, seed uint64, n int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(seed, seed))
	states := []string{StateActive, StateActive, StateActive, StateFailed, StateSuspended, StateExported, StateDestroyed}
	ago := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	for i := range n {
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: fmt.Sprintf("d%04d", i), State: states[rnd.IntN(len(states))], Config: "{}", CatalogRevision: "r1"})
		require.NoError(t, err)
		for _, app := range []string{"miniflux", "wiki"}[:1+rnd.IntN(2)] {
			dbState := []string{store.ResourceProvisioned, store.ResourceProvisioned, store.ResourceKept, "failed"}[rnd.IntN(4)]
			require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: app + "-db", App: app, Type: contract.PostgreSQL, Spec: "{}", Result: "{}", State: dbState}))
			spec := `{"buckets":{"backups":{"backup":true}}}`
			if rnd.IntN(6) == 0 {
				spec = `{"buckets":{"media":{}}}`
			}
			require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: app + "-backups", App: app, Type: contract.S3, Spec: spec, Result: "{}", State: store.ResourceProvisioned}))
			switch rnd.IntN(6) {
			case 0: // first seen at this tick
				continue
			case 1: // started an hour ago, nothing yet
				require.NoError(t, st.EnsureAppBackup(ctx, d.ID, app, ago(1)))
				continue
			}
			require.NoError(t, st.EnsureAppBackup(ctx, d.ID, app, ago(24*(2+rnd.IntN(5)))))
			require.NoError(t, st.BackupStarted(ctx, d.ID, app, "", store.BackupScheduled, ago([]int{1, 20, 30, 60}[rnd.IntN(4)])))
			if rnd.IntN(4) > 0 {
				require.NoError(t, st.BackupFinished(ctx, d.ID, app, "snap", "", ago(1)))
			}
			if h := []int{0, 2, 23, 24, 40}[rnd.IntN(5)]; h > 0 {
				require.NoError(t, st.DrillStarted(ctx, d.ID, app, ago(h)))
			}
		}
		for c := range rnd.IntN(3) {
			res := fmt.Sprintf(`{"certificate":"-----BEGIN CERTIFICATE-----","not_after":%q,"renew_after":%q,"issuer":"test CA"}`,
				ago(-24*40).Format(time.RFC3339), ago([]int{48, 1, -1, -24 * 10}[rnd.IntN(4)]).Format(time.RFC3339))
			switch rnd.IntN(5) {
			case 0: // no renew_after: 30 days before not_after, read at every tick
				res = fmt.Sprintf(`{"certificate":"x","not_after":%q,"issuer":"test CA"}`, ago([]int{24 * 20, 24 * 40}[rnd.IntN(2)]*-1).Format(time.RFC3339))
			case 1: // no certificate: nothing to renew
				res = `{"host":"127.0.0.1"}`
			}
			state := store.ResourceProvisioned
			if rnd.IntN(8) == 0 {
				state = "failed"
			}
			require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: fmt.Sprintf("cert-%d", c), App: "miniflux", Type: contract.TLS,
				Spec: `{"domains":["` + d.Namespace + `.example.test"]}`, Result: res, State: state}))
		}
		if rnd.IntN(8) == 0 {
			_, err := st.CreateBuild(ctx, d.ID)
			require.NoError(t, err)
		}
	}
}

// tickEngine is an engine on st whose queue keeps what it is given.
func tickEngine(t testing.TB, st *store.Store, now time.Time) *Engine {
	t.Helper()
	e := New(Options{Store: st, Clock: func() time.Time { return now },
		BackupPolicy: func(app string) BackupPolicy {
			if app == "wiki" {
				return BackupPolicy{Schedule: "0 */6 * * *", KeepWithin: 30 * 24 * time.Hour}
			}
			return BackupPolicy{Schedule: "30 3 * * *", KeepWithin: 30 * 24 * time.Hour}
		}})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	e.SetQueue(q)
	return e
}

// tickOutcome is what a tick decided, by namespace: the builds queued (operation and
// configuration) and the backup records (app, since, last drill).
func tickOutcome(t testing.TB, st *store.Store) []string {
	t.Helper()
	ctx := context.Background()
	ds, err := st.ListDeployments(ctx, "")
	require.NoError(t, err)
	var out []string
	for _, d := range ds {
		builds, err := st.ListBuilds(ctx, d.ID, 0)
		require.NoError(t, err)
		for _, b := range builds {
			out = append(out, fmt.Sprintf("%s build %s %s %s", d.Namespace, b.Operation, b.State, strings.ReplaceAll(b.Config, d.ID, "ID")))
		}
		recs, err := st.AppBackups(ctx, d.ID)
		require.NoError(t, err)
		for _, r := range recs {
			out = append(out, fmt.Sprintf("%s record %s since %s", d.Namespace, r.App, r.Since.UTC().Format(time.RFC3339Nano)))
		}
	}
	sort.Strings(out)
	return out
}

// The tick that asks the database for its candidates queues exactly the builds, and
// records exactly the backup records, that the tick reading everything did, tick after
// tick (a backup's schedule firing, drills and certificates falling due), on SQLite and
// on PostgreSQL.
func TestTickDecidesAsTheFullRead(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgresql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			open := func() *store.Store {
				cfg := store.Config{Database: "sqlite", DataDir: t.TempDir()}
				if db == "postgresql" {
					cfg = store.Config{Database: pgtest.DSN(t)}
				}
				st, err := store.Open(ctx, cfg)
				require.NoError(t, err)
				t.Cleanup(func() { st.Close() })
				return st
			}
			now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
			full, cand := open(), open()
			tickStore(t, full, 16, 120, now)
			tickStore(t, cand, 16, 120, now)
			require.Equal(t, tickOutcome(t, full), tickOutcome(t, cand), "the two stores start the same")
			decided := 0
			for _, at := range []time.Time{now, now.Add(time.Hour), now.Add(16 * time.Hour), now.Add(25 * time.Hour), now.Add(12 * 24 * time.Hour)} {
				require.NoError(t, tickEngine(t, full, at).fullReadTick(ctx, at))
				require.NoError(t, tickEngine(t, cand, at).Tick(ctx, at))
				want, got := tickOutcome(t, full), tickOutcome(t, cand)
				require.Equal(t, want, got, "the tick at %s", at)
				decided = len(want)
				// The builds queued run: the next tick finds the deployments free.
				for _, st := range []*store.Store{full, cand} {
					ds, err := st.ListDeployments(ctx, "")
					require.NoError(t, err)
					for _, d := range ds {
						builds, err := st.ListBuilds(ctx, d.ID, 0)
						require.NoError(t, err)
						for _, b := range builds {
							if b.State == store.BuildQueued {
								require.NoError(t, st.SetBuildState(ctx, b.ID, store.BuildSucceeded, ""))
							}
						}
					}
				}
			}
			require.Greater(t, decided, 200, "the ticks queued builds and recorded backups")
		})
	}
}
