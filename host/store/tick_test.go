package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// A tls row holding a certificate is a renewal candidate from its renew_after on, one
// whose result gives no renew_after at every tick (the engine decides from the
// certificate), one without a certificate never, nor one of a suspended deployment.
func TestDueCertificatesByRenewAfter(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
		active, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", State: "active", Config: "{}"})
		require.NoError(t, err)
		suspended, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "umbrella", State: "suspended", Config: "{}"})
		require.NoError(t, err)
		put := func(d store.Deployment, name, result string) {
			require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: name, App: "miniflux", Type: "tls", Spec: "{}", Result: result, State: store.ResourceProvisioned}))
		}
		put(active, "a-due", `{"certificate":"pem","not_after":"2026-06-01T00:00:00Z","renew_after":"2026-05-04T12:00:00Z"}`)
		put(active, "b-fresh", `{"certificate":"pem","not_after":"2026-07-01T00:00:00Z","renew_after":"2026-05-04T12:00:01Z"}`)
		put(active, "c-no-renew-after", `{"certificate":"pem","not_after":"2026-09-01T00:00:00Z"}`)
		put(active, "d-no-certificate", `{"host":"127.0.0.1"}`)
		put(suspended, "a-due", `{"certificate":"pem","not_after":"2026-06-01T00:00:00Z","renew_after":"2026-05-01T00:00:00Z"}`)
		names := func(at time.Time) []string {
			rows, err := st.DueCertificates(ctx, at, []string{"active", "failed"})
			require.NoError(t, err)
			var out []string
			for _, r := range rows {
				require.Equal(t, active.ID, r.DeploymentID)
				require.NotEmpty(t, r.Result, "the engine reads the certificate from the result")
				out = append(out, r.Name)
			}
			return out
		}
		require.Equal(t, []string{"a-due", "c-no-renew-after"}, names(now))
		require.Equal(t, []string{"a-due", "b-fresh", "c-no-renew-after"}, names(now.Add(time.Second)))
		require.Equal(t, []string{"c-no-renew-after"}, names(now.Add(-time.Hour)))

		// Renewed: the new certificate's renew_after replaces the old one.
		put(active, "a-due", `{"certificate":"pem2","not_after":"2026-08-01T00:00:00Z","renew_after":"2026-07-01T00:00:00Z"}`)
		require.Equal(t, []string{"c-no-renew-after"}, names(now))
	})
}

// The backup candidates are the deployments with a database and no record yet (when the
// sweep is asked for), and those whose record's schedule base (the later of since and the
// last attempt) is before the app's cutoff; the drill candidates those with a good backup
// and no drill since the cutoff. Neither holds a suspended deployment.
func TestBackupAndDrillCandidates(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		cutoff := time.Date(2026, 5, 4, 3, 30, 0, 0, time.UTC)
		mk := func(ns, state string) store.Deployment {
			d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: ns, State: state, Config: "{}"})
			require.NoError(t, err)
			require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-db", App: "miniflux", Type: "postgresql", Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))
			return d
		}
		unrecorded := mk("unrecorded", "active")
		due := mk("due", "failed")
		require.NoError(t, st.EnsureAppBackup(ctx, due.ID, "miniflux", cutoff.Add(-48*time.Hour)))
		require.NoError(t, st.BackupStarted(ctx, due.ID, "miniflux", "", "scheduled", cutoff.Add(-time.Second)))
		require.NoError(t, st.BackupFinished(ctx, due.ID, "miniflux", "snap", "", cutoff.Add(-time.Second)))
		done := mk("done", "active")
		require.NoError(t, st.EnsureAppBackup(ctx, done.ID, "miniflux", cutoff.Add(-48*time.Hour)))
		require.NoError(t, st.BackupStarted(ctx, done.ID, "miniflux", "", "scheduled", cutoff))
		require.NoError(t, st.DrillStarted(ctx, done.ID, "miniflux", cutoff))
		fresh := mk("fresh", "active")
		require.NoError(t, st.EnsureAppBackup(ctx, fresh.ID, "miniflux", cutoff.Add(time.Minute)))
		suspended := mk("suspended", "suspended")
		require.NoError(t, st.EnsureAppBackup(ctx, suspended.ID, "miniflux", cutoff.Add(-48*time.Hour)))

		states := []string{"active", "failed"}
		ids, err := st.BackupCandidates(ctx, states, map[string]time.Time{"miniflux": cutoff}, true)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{unrecorded.ID, due.ID}, ids)
		// Without the sweep, only the records are read: the database without one is not.
		ids, err = st.BackupCandidates(ctx, states, map[string]time.Time{"miniflux": cutoff}, false)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{due.ID}, ids)
		// An app without a cutoff (its schedule does not parse) has every record read.
		ids, err = st.BackupCandidates(ctx, states, nil, true)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{unrecorded.ID, due.ID, done.ID, fresh.ID}, ids)

		// Only due has a good backup; its drill is due a day after its backups started.
		ids, err = st.DrillCandidates(ctx, states, cutoff)
		require.NoError(t, err)
		require.Equal(t, []string{due.ID}, ids)
		require.NoError(t, st.DrillStarted(ctx, due.ID, "miniflux", cutoff.Add(time.Microsecond)))
		ids, err = st.DrillCandidates(ctx, states, cutoff)
		require.NoError(t, err)
		require.Empty(t, ids)

		ds, err := st.DeploymentsByIDs(ctx, []string{done.ID, unrecorded.ID, "no-such-id"})
		require.NoError(t, err)
		require.Len(t, ds, 2)
		require.Equal(t, done.ID, ds[0].ID, "newest first")
	})
}

// The update candidates are the active deployments with an automatic or window policy,
// not at the newest revision and not tried at it.
func TestUpdateCandidates(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		mk := func(ns, state, policy, revision, tried string) store.Deployment {
			d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: ns, State: state, Config: "{}", UpdatePolicy: policy, CatalogRevision: revision, LastAutoRevision: tried})
			require.NoError(t, err)
			return d
		}
		automatic := mk("automatic", "active", "automatic", "r1", "")
		window := mk("window", "active", "window", "", "r1")
		mk("manual", "active", "manual", "r1", "")
		mk("unset", "active", "", "r1", "")
		mk("current", "active", "automatic", "r2", "")
		mk("tried", "active", "automatic", "r1", "r2")
		mk("suspended", "suspended", "automatic", "r1", "")
		ds, err := st.UpdateCandidates(ctx, "r2")
		require.NoError(t, err)
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		require.Equal(t, []string{window.ID, automatic.ID}, ids)
		ds, err = st.UpdateCandidates(ctx, "")
		require.NoError(t, err)
		require.Empty(t, ds)
	})
}

// BackedUpApps names each app with a backup record once, in order, and none of an empty
// store, on both databases.
func TestBackedUpApps(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		apps, err := st.BackedUpApps(ctx)
		require.NoError(t, err)
		require.Empty(t, apps)
		since := time.Date(2026, 5, 4, 3, 30, 0, 0, time.UTC)
		for i, ns := range []string{"a", "b", "c", "d"} {
			d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: ns, State: "active", Config: "{}"})
			require.NoError(t, err)
			for _, app := range []string{"wiki", "miniflux", "peertube", "miniflux"}[i:] {
				require.NoError(t, st.EnsureAppBackup(ctx, d.ID, app, since))
			}
		}
		apps, err = st.BackedUpApps(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"miniflux", "peertube", "wiki"}, apps)
	})
}
