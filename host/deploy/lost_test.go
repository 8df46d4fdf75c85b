package deploy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// A build lost with its host fails the deployment it was changing (a deploy left
// deploying with no build running, a suspend, destroy or export stopped halfway), so the
// page says so and the next submit builds again; a lost backup, restore or drill of an
// app's data leaves the deployment as it was, as their failure does, and a lost
// revoke-export leaves it exported for the tick to queue again.
func TestBuildsLostFailOnlyTheDeploymentsTheyChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := tickEngine(t, st, now)
	cases := []struct{ operation, before, after string }{
		{store.OperationDeploy, StateDeploying, StateFailed},
		{store.OperationSuspend, StateActive, StateFailed},
		{store.OperationDestroy, StateActive, StateFailed},
		{store.OperationExport, StateActive, StateFailed},
		{store.OperationBackup, StateActive, StateActive},
		{store.OperationRestore, StateActive, StateActive},
		{store.OperationDrill, StateFailed, StateFailed},
		{store.OperationRevokeExport, StateExported, StateExported},
	}
	var ids []string
	deployments := map[string]string{}
	for i, c := range cases {
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: fmt.Sprintf("lost%d", i), State: c.before, Config: "{}"})
		require.NoError(t, err)
		b, err := st.SubmitBuild(ctx, d.ID, c.operation, store.Submission{Config: "{}"})
		require.NoError(t, err)
		ids = append(ids, b.ID)
		deployments[c.operation] = d.ID
	}
	require.NoError(t, st.FailBuilds(ctx, ids, "lost"))
	e.BuildsLost(ctx, append(ids, "no-such-build"))
	for _, c := range cases {
		d, err := st.GetDeployment(ctx, deployments[c.operation])
		require.NoError(t, err)
		require.Equal(t, c.after, d.State, "after a lost %s", c.operation)
	}
}
