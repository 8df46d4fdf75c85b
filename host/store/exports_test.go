package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
)

// An export is recorded with its apps, found by id and as its deployment's latest, due once
// expired or while confirming, moved only along exported -> confirming -> confirmed or
// exported -> revoked, each move once, and refused over its bounds or for
// no deployment.
func TestExports(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}"})
		require.NoError(t, err)
		expires := time.Now().Add(time.Hour)
		apps := map[string]store.ExportApp{"miniflux": {Snapshot: "0123abcd", Key: "export-read"}}
		x, err := st.CreateExport(ctx, "x1", d.ID, "digest", apps, expires)
		require.NoError(t, err)
		require.Equal(t, store.ExportExported, x.State)
		got, err := st.GetExport(ctx, "x1")
		require.NoError(t, err)
		gotApps, err := got.AppsOf()
		require.NoError(t, err)
		require.Equal(t, apps, gotApps)
		latest, err := st.LatestExport(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, "x1", latest.ID)

		due, err := st.DueExports(ctx, time.Now())
		require.NoError(t, err)
		require.Empty(t, due)
		due, err = st.DueExports(ctx, expires.Add(time.Minute))
		require.NoError(t, err)
		require.Len(t, due, 1, "an expired export is due")

		_, err = st.FinishExport(ctx, "x1", store.ExportExported, store.ExportConfirmed)
		require.Error(t, err, "a confirmation goes through confirming")
		won, err := st.FinishExport(ctx, "x1", store.ExportExported, store.ExportConfirming)
		require.NoError(t, err)
		require.True(t, won)
		won, err = st.FinishExport(ctx, "x1", store.ExportExported, store.ExportRevoked)
		require.NoError(t, err)
		require.False(t, won, "a confirming export does not expire")
		due, err = st.DueExports(ctx, time.Now())
		require.NoError(t, err)
		require.Len(t, due, 1, "a confirming export is due before its expiry: its revoke is retried")
		won, err = st.FinishExport(ctx, "x1", store.ExportConfirming, store.ExportConfirmed)
		require.NoError(t, err)
		require.True(t, won)
		won, err = st.FinishExport(ctx, "x1", store.ExportConfirming, store.ExportConfirmed)
		require.NoError(t, err)
		require.False(t, won, "an export ends once")
		got, err = st.GetExport(ctx, "x1")
		require.NoError(t, err)
		require.Equal(t, store.ExportConfirmed, got.State)
		due, err = st.DueExports(ctx, expires.Add(time.Minute))
		require.NoError(t, err)
		require.Empty(t, due, "an ended export is not revoked again")

		x4, err := st.CreateExport(ctx, "x4", d.ID, "digest", apps, expires)
		require.NoError(t, err)
		won, err = st.FinishExport(ctx, x4.ID, store.ExportExported, store.ExportRevoked)
		require.NoError(t, err)
		require.True(t, won, "an expired export is revoked")
		_, err = st.FinishExport(ctx, x4.ID, store.ExportRevoked, store.ExportConfirmed)
		require.Error(t, err, "a revoked export stays revoked")

		_, err = st.CreateExport(ctx, "x2", d.ID, "digest", map[string]store.ExportApp{"miniflux": {Snapshot: strings.Repeat("a", 200)}}, expires)
		require.Error(t, err, "a snapshot id over the bound is refused")
		_, err = st.CreateExport(ctx, "x3", "no-such-deployment", "digest", apps, expires)
		require.True(t, errors.Is(err, store.ErrNotFound), "%v", err)
	})
}
