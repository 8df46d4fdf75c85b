package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// What the scheduler reads and writes: backup records, busy deployments, the resources
// of some types, and the pruning of old build logs, on both databases.
func TestBackupRecordsAndRetention(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}"})
		require.NoError(t, err)
		since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

		require.NoError(t, st.EnsureAppBackup(ctx, d.ID, "miniflux", since))
		require.NoError(t, st.EnsureAppBackup(ctx, d.ID, "miniflux", since.Add(time.Hour)), "a second ensure changes nothing")
		require.NoError(t, st.BackupStarted(ctx, d.ID, "miniflux", "b1", store.BackupScheduled, since.Add(24*time.Hour)))
		require.NoError(t, st.BackupFinished(ctx, d.ID, "miniflux", "", "restic: unreachable", since.Add(25*time.Hour)))
		require.NoError(t, st.BackupFinished(ctx, d.ID, "miniflux", "", "restic: unreachable again", since.Add(26*time.Hour)))
		recs, err := st.AppBackups(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		r := recs[0]
		require.True(t, since.Equal(r.Since))
		require.True(t, since.Add(24*time.Hour).Equal(*r.LastAttemptAt))
		require.Equal(t, "b1", r.LastBuildID)
		require.Equal(t, store.BackupScheduled, r.LastTrigger)
		require.Nil(t, r.LastSuccessAt)
		require.Equal(t, "restic: unreachable again", r.LastError)
		require.Equal(t, 2, r.Failures)

		require.NoError(t, st.BackupStarted(ctx, d.ID, "pixelfed", "b2", store.BackupManual, since.Add(48*time.Hour)))
		require.NoError(t, st.BackupFinished(ctx, d.ID, "miniflux", "abcd", "", since.Add(49*time.Hour)))
		recs, err = st.AppBackups(ctx, "")
		require.NoError(t, err)
		require.Len(t, recs, 2)
		require.Equal(t, "miniflux", recs[0].App)
		require.Zero(t, recs[0].Failures)
		require.Empty(t, recs[0].LastError)
		require.Equal(t, "abcd", recs[0].LastSnapshot)
		require.True(t, since.Add(48*time.Hour).Equal(recs[1].Since), "a first backup starts the record")
		require.NoError(t, st.DeleteAppBackups(ctx, d.ID, ""))
		recs, err = st.AppBackups(ctx, d.ID)
		require.NoError(t, err)
		require.Empty(t, recs)

		require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-db", App: "miniflux", Type: "postgresql", Spec: "{}", Result: `{"secret":"x"}`, State: store.ResourceProvisioned}))
		require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-web", App: "miniflux", Type: "instance", Spec: "{}", Result: "{}", State: store.ResourceProvisioned}))
		rows, err := st.ResourcesOfTypes(ctx, "postgresql", "s3")
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, "miniflux-db", rows[0].Name)
		require.Empty(t, rows[0].Result, "the tick reads no results")

		b, err := st.CreateBuild(ctx, d.ID)
		require.NoError(t, err)
		busy, err := st.BusyDeployments(ctx)
		require.NoError(t, err)
		require.Equal(t, map[string]bool{d.ID: true}, busy)
		_, err = st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: b.ID, Step: "plan", Level: store.LevelInfo, Message: "m"})
		require.NoError(t, err)
		n, err := st.PruneBuildLogs(ctx, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "an unfinished build keeps its log")
		require.NoError(t, st.SetBuildState(ctx, b.ID, store.BuildSucceeded, ""))
		busy, err = st.BusyDeployments(ctx)
		require.NoError(t, err)
		require.Empty(t, busy)
		n, err = st.PruneBuildLogs(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "finished after the cut")
		n, err = st.PruneBuildLogs(ctx, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	})
}

func TestUserAuditEventsNewestFirst(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		seal := func(e store.AuditEvent) string { return "h" }
		for i, e := range []store.AuditEvent{
			{Actor: "alice", Action: "user.login"},
			{Actor: "root", Action: "user.promote", Subject: "alice"},
			{Actor: "bob", Action: "user.login"},
			{Actor: "alice", Action: "token.create", Subject: "alice"},
			{Actor: "alice", Action: "deployment.submit"},
		} {
			e.Result, e.Time = "ok", time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC)
			_, err := st.AppendAuditEvent(ctx, e, seal)
			require.NoError(t, err)
		}
		events, err := st.UserAuditEvents(ctx, "alice", 10)
		require.NoError(t, err)
		var actions []string
		for _, e := range events {
			actions = append(actions, e.Action)
		}
		require.Equal(t, []string{"deployment.submit", "token.create", "user.promote", "user.login"}, actions, "by or about alice, newest first, an event by and about her once")
		events, err = st.UserAuditEvents(ctx, "alice", 1)
		require.NoError(t, err)
		require.Len(t, events, 1)
	})
}

func TestUserAuditEventsAfterInOrder(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		seal := func(e store.AuditEvent) string { return "h" }
		for i, e := range []store.AuditEvent{
			{Actor: "alice", Action: "user.login"},
			{Actor: "root", Action: "user.promote", Subject: "alice"},
			{Actor: "bob", Action: "user.login"},
			{Actor: "alice", Action: "token.create", Subject: "alice"},
			{Actor: "alice", Action: "deployment.submit"},
		} {
			e.Result, e.Time = "ok", time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC)
			_, err := st.AppendAuditEvent(ctx, e, seal)
			require.NoError(t, err)
		}
		seqs := func(after int64, limit int) []int64 {
			events, err := st.UserAuditEventsAfter(ctx, "alice", after, limit)
			require.NoError(t, err)
			var out []int64
			for _, e := range events {
				out = append(out, e.Seq)
			}
			return out
		}
		require.Equal(t, []int64{1, 2, 4, 5}, seqs(0, 10), "by or about alice, oldest first, an event by and about her once")
		require.Equal(t, []int64{1, 2}, seqs(0, 2))
		require.Equal(t, []int64{4, 5}, seqs(2, 10), "after a sequence")
	})
}
