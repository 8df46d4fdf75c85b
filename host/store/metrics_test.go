package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// The metrics' queries, on both databases: unfinished builds grouped by operation and
// state, and backup records with their deployment's state.
func TestMetricsQueries(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		var ids []string
		for _, ns := range []string{"acme", "globex", "initech"} {
			d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: ns, Config: "{}"})
			require.NoError(t, err)
			ids = append(ids, d.ID)
		}
		b1, err := st.SubmitBuild(ctx, ids[0], store.OperationDeploy, store.Submission{Config: "{}"})
		require.NoError(t, err)
		_, err = st.SubmitBuild(ctx, ids[1], store.OperationDeploy, store.Submission{Config: "{}"})
		require.NoError(t, err)
		b3, err := st.SubmitBuild(ctx, ids[2], store.OperationBackup, store.Submission{Config: "{}"})
		require.NoError(t, err)
		require.NoError(t, st.SetBuildState(ctx, b1.ID, store.BuildRunning, ""))
		require.NoError(t, st.SetBuildState(ctx, b3.ID, store.BuildRunning, ""))
		require.NoError(t, st.SetBuildState(ctx, b3.ID, store.BuildSucceeded, ""))

		counts, err := st.UnfinishedBuildCounts(ctx)
		require.NoError(t, err)
		require.Equal(t, []store.BuildCount{
			{Operation: store.OperationDeploy, State: store.BuildQueued, Count: 1},
			{Operation: store.OperationDeploy, State: store.BuildRunning, Count: 1},
		}, counts, "the finished backup is not counted")

		require.NoError(t, st.UpdateDeployment(ctx, ids[0], map[string]any{"state": "active"}))
		since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		require.NoError(t, st.EnsureAppBackup(ctx, ids[0], "miniflux", since))
		require.NoError(t, st.EnsureAppBackup(ctx, ids[1], "pixelfed", since))
		require.NoError(t, st.BackupStarted(ctx, ids[1], "pixelfed", "b", store.BackupScheduled, since.Add(time.Hour)))
		require.NoError(t, st.BackupFinished(ctx, ids[1], "pixelfed", "", "restic: unreachable", since.Add(2*time.Hour)))
		recs, err := st.AppBackupsWithState(ctx)
		require.NoError(t, err)
		require.Len(t, recs, 2)
		byApp := map[string]store.AppBackupOfDeployment{}
		for _, r := range recs {
			byApp[r.App] = r
		}
		require.Equal(t, "active", byApp["miniflux"].DeploymentState)
		require.True(t, since.Equal(byApp["miniflux"].Since))
		require.Equal(t, ids[1], byApp["pixelfed"].DeploymentID)
		require.Equal(t, 1, byApp["pixelfed"].Failures)
	})
}
