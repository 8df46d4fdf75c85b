package deploy

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// A finished deploy opens the periods of the apps it enables with the resources they
// hold, a later one without an app ends its period, and usage reports an operator's
// events and periods with totals per month, in JSON's types and in CSV; another
// operator's are not in theirs.
func TestUsageReportsCostsAndAppPeriodsPerOperatorAndMonth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 5, 31, 12, 0, 0, 0, time.UTC)
	e := New(Options{Store: st, Clock: func() time.Time { return now }})
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Owner: "alice", Domain: "acme.test", State: StateActive, Config: "{}"})
	require.NoError(t, err)
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-db", App: "miniflux", Type: "postgresql", Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-web", App: "miniflux", Type: "instance", Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))

	r := &run{e: e, d: d, build: store.Build{Operation: store.OperationDeploy, Config: `{"domain":"acme.test","apps":{"miniflux":{"enable":true},"hello":{"enable":false}}}`}}
	r.recordUsage(ctx, nil)
	now = now.Add(24 * time.Hour) // 2026-06-01 12:00
	r.build.Config = `{"domain":"acme.test","apps":{}}`
	r.recordUsage(ctx, nil)

	_, err = st.RecordDomainEvent(ctx, store.DomainEvent{Time: time.Date(2026, 5, 31, 13, 0, 0, 0, time.UTC), Domain: "acme.test", DeploymentID: d.ID, Owner: "alice",
		Registrar: "porkbun", Kind: store.DomainEventRegistration, CostMicros: 9_730_000, Currency: "USD"})
	require.NoError(t, err)
	_, err = st.RecordDomainEvent(ctx, store.DomainEvent{Time: time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC), Domain: "bob.test", Owner: "bob",
		Registrar: "porkbun", Kind: store.DomainEventRenewal, CostMicros: 10_810_000, Currency: "USD"})
	require.NoError(t, err)

	from, to := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	u, err := e.Usage(ctx, "alice", from, to)
	require.NoError(t, err)
	require.Len(t, u.Events, 1)
	require.Equal(t, int64(9_730_000), u.Events[0].CostMicros)
	require.Len(t, u.Periods, 1)
	p := u.Periods[0]
	require.Equal(t, "miniflux", p.App)
	require.Equal(t, []string{"instance", "postgresql"}, p.Resources)
	require.False(t, p.Ongoing)
	require.Equal(t, 24.0, p.Hours)
	require.Equal(t, []UsageTotal{
		{Owner: "alice", Month: "2026-05", Currency: "USD", CostMicros: 9_730_000, AppHours: 12},
		{Owner: "alice", Month: "2026-06", AppHours: 12},
	}, u.Totals)

	all, err := e.Usage(ctx, "", from, to)
	require.NoError(t, err)
	require.Len(t, all.Events, 2, "the superuser's view holds every operator's")

	var buf bytes.Buffer
	require.NoError(t, u.WriteCSV(&buf))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+1+1+2)
	require.Equal(t, []string{"event", "alice", "2026-05", d.ID, "acme.test", "registration", "2026-05-31T13:00:00Z", "2026-05-31T13:00:00Z", "", "9730000", "USD", ""}, rows[1])
	require.Equal(t, "period", rows[2][0])
	require.Equal(t, "24.00", rows[2][8])
	require.Equal(t, []string{"total", "alice", "2026-05", "", "", "", "", "", "12.00", "9730000", "USD", ""}, rows[3])

	_, err = e.Usage(ctx, "alice", to, from)
	require.Equal(t, "/from", err.(*Error).Location)
}

// BenchmarkUsage reports a month of 1,000 domain events and 1,000 app periods of 100
// operators, the superuser's view, on SQLite.
func BenchmarkUsage(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	month := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	e := New(Options{Store: st, Clock: func() time.Time { return month.AddDate(0, 1, 0) }})
	for i := range 1000 {
		owner := fmt.Sprintf("op-%d", i%100)
		_, err := st.RecordDomainEvent(ctx, store.DomainEvent{Time: month.Add(time.Duration(i) * time.Minute), Domain: fmt.Sprintf("d%d.test", i), Owner: owner,
			Registrar: "porkbun", Kind: store.DomainEventRenewal, CostMicros: 10_810_000, Currency: "USD"})
		require.NoError(b, err)
		require.NoError(b, st.RecordAppPeriods(ctx, fmt.Sprintf("dep-%d", i), owner, map[string]string{"miniflux": "instance postgresql"}, month.Add(time.Duration(i)*time.Minute)))
	}
	b.ResetTimer()
	for b.Loop() {
		u, err := e.Usage(ctx, "", month, month.AddDate(0, 1, 0))
		if err != nil || len(u.Totals) != 100 {
			b.Fatalf("%v, %d totals", err, len(u.Totals))
		}
	}
}
