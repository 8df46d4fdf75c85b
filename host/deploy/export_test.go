package deploy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// newExportEngine returns an engine whose queue runs its builds, with an exported
// deployment whose backups bucket is provisioned with (keyed) or without the export's
// read-only key, and its export x1 with the token "token". The environment names no s3
// provider, so a build that must take a key off a bucket fails as when the provider
// does not answer.
func newExportEngine(t *testing.T, clock *time.Time, keyed bool) (*Engine, store.Deployment) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := New(Options{Store: st, Clock: func() time.Time { return *clock }})
	q, err := queue.New(st, queue.Config{Builder: e})
	require.NoError(t, err)
	e.SetQueue(q)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", State: StateExported, Config: "{}"})
	require.NoError(t, err)
	spec := `{"buckets":{"backups":{"backup":true}}}`
	if keyed {
		spec = `{"buckets":{"backups":{"backup":true}},"keys":{"export-read":{"grants":{"backups":"read"}}}}`
	}
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-backups", App: "miniflux", Type: contract.S3, Spec: spec, Result: "{}", State: store.ResourceProvisioned}))
	_, err = st.CreateExport(ctx, "x1", d.ID, tokenDigest("token"), map[string]store.ExportApp{"miniflux": {Snapshot: "0123abcd", Key: exportKey}}, clock.Add(ExportTTL))
	require.NoError(t, err)
	return e, d
}

func revokeBuilds(t *testing.T, e *Engine, d store.Deployment) []store.Build {
	t.Helper()
	bs, err := e.opts.Store.ListBuilds(context.Background(), d.ID, 0)
	require.NoError(t, err)
	var out []store.Build
	for _, b := range bs {
		require.Equal(t, store.OperationRevokeExport, b.Operation)
		out = append(out, b)
	}
	return out
}

// The target's confirmation revokes the keys in a revoke-export build of the deployment
// and answers confirmed once it succeeded; a second confirmation answers the same and
// queues nothing; a wrong token or id is not found.
func TestConfirmRevokesInABuild(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	e, d := newExportEngine(t, &clock, false)
	ctx := context.Background()

	_, err := e.ConfirmExport(ctx, "x1", "wrong")
	var de *Error
	require.True(t, errors.As(err, &de) && de.Code == CodeNotFound, "%v", err)
	_, err = e.ConfirmExport(ctx, "x2", "token")
	require.True(t, errors.As(err, &de) && de.Code == CodeNotFound, "%v", err)

	x, err := e.ConfirmExport(ctx, "x1", "token")
	require.NoError(t, err)
	require.Equal(t, store.ExportConfirmed, x.State)
	bs := revokeBuilds(t, e, d)
	require.Len(t, bs, 1)
	require.Equal(t, store.BuildSucceeded, bs[0].State)
	got, err := e.opts.Store.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, StateExported, got.State, "a revoke leaves the deployment exported")

	x, err = e.ConfirmExport(ctx, "x1", "token")
	require.NoError(t, err)
	require.Equal(t, store.ExportConfirmed, x.State)
	require.Len(t, revokeBuilds(t, e, d), 1, "a second confirmation queues nothing")

	_, err = e.Resume(ctx, d.ID)
	require.True(t, errors.As(err, &de) && de.Code == CodeConflict, "a confirmed export is not resumed: %v", err)
}

// A revoke that fails leaves the export confirming, which the confirmation answers and a
// resume refuses; the scheduler's tick queues the revoke again until it succeeds.
func TestConfirmThatFailsToRevokeIsRetriedByTheTick(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	e, d := newExportEngine(t, &clock, true)
	ctx := context.Background()

	x, err := e.ConfirmExport(ctx, "x1", "token")
	require.NoError(t, err)
	require.Equal(t, store.ExportConfirming, x.State)
	bs := revokeBuilds(t, e, d)
	require.Len(t, bs, 1)
	require.Equal(t, store.BuildFailed, bs[0].State)
	require.Contains(t, bs[0].Reason, "read-only key of miniflux")
	_, err = e.Resume(ctx, d.ID)
	var de *Error
	require.True(t, errors.As(err, &de) && de.Code == CodeConflict, "a confirming export is not resumed: %v", err)

	require.NoError(t, e.runExportExpiry(ctx, clock))
	waitRevokes(t, e, d, 2)
	x, err = e.opts.Store.GetExport(ctx, "x1")
	require.NoError(t, err)
	require.Equal(t, store.ExportConfirming, x.State, "a failed revoke keeps the export confirming")

	// The key is gone from the bucket's request (its provider took it off): the next
	// tick's revoke succeeds.
	row, err := e.opts.Store.Resources(ctx, d.ID)
	require.NoError(t, err)
	row[0].Spec = `{"buckets":{"backups":{"backup":true}}}`
	require.NoError(t, e.opts.Store.PutResource(ctx, row[0]))
	require.NoError(t, e.runExportExpiry(ctx, clock))
	bs = waitRevokes(t, e, d, 3)
	require.Equal(t, store.BuildSucceeded, bs[0].State)
	x, err = e.opts.Store.GetExport(ctx, "x1")
	require.NoError(t, err)
	require.Equal(t, store.ExportConfirmed, x.State)
}

// An export past its expiry is revoked by a build the tick queues, not before; a
// confirmation after it answers revoked and queues nothing.
func TestExportExpiryRevokesInABuild(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	e, d := newExportEngine(t, &clock, false)
	ctx := context.Background()

	require.NoError(t, e.runExportExpiry(ctx, clock))
	require.Empty(t, revokeBuilds(t, e, d), "nothing is due before the expiry")
	clock = clock.Add(ExportTTL + time.Minute)
	require.NoError(t, e.runExportExpiry(ctx, clock))
	bs := waitRevokes(t, e, d, 1)
	require.Equal(t, store.BuildSucceeded, bs[0].State)
	x, err := e.ConfirmExport(ctx, "x1", "token")
	require.NoError(t, err)
	require.Equal(t, store.ExportRevoked, x.State)
	require.Len(t, revokeBuilds(t, e, d), 1)
}

// waitRevokes waits until the deployment has n revoke-export builds, all finished, and
// returns them newest first.
func waitRevokes(t *testing.T, e *Engine, d store.Deployment, n int) []store.Build {
	t.Helper()
	var bs []store.Build
	require.Eventually(t, func() bool {
		bs = revokeBuilds(t, e, d)
		if len(bs) != n {
			return false
		}
		for _, b := range bs {
			if !b.State.Finished() {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond)
	return bs
}
