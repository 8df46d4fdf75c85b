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

// An export is recorded with its apps, found by id and as its deployment's latest, listed
// once expired, ended once (of two ends, one wins), and refused over its bounds or for
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

		expired, err := st.ExpiredExports(ctx, time.Now())
		require.NoError(t, err)
		require.Empty(t, expired)
		expired, err = st.ExpiredExports(ctx, expires.Add(time.Minute))
		require.NoError(t, err)
		require.Len(t, expired, 1)

		won, err := st.FinishExport(ctx, "x1", store.ExportConfirmed)
		require.NoError(t, err)
		require.True(t, won)
		won, err = st.FinishExport(ctx, "x1", store.ExportRevoked)
		require.NoError(t, err)
		require.False(t, won, "an export ends once")
		got, err = st.GetExport(ctx, "x1")
		require.NoError(t, err)
		require.Equal(t, store.ExportConfirmed, got.State)
		expired, err = st.ExpiredExports(ctx, expires.Add(time.Minute))
		require.NoError(t, err)
		require.Empty(t, expired, "an ended export is not revoked again")

		_, err = st.CreateExport(ctx, "x2", d.ID, "digest", map[string]store.ExportApp{"miniflux": {Snapshot: strings.Repeat("a", 200)}}, expires)
		require.Error(t, err, "a snapshot id over the bound is refused")
		_, err = st.CreateExport(ctx, "x3", "no-such-deployment", "digest", apps, expires)
		require.True(t, errors.Is(err, store.ErrNotFound), "%v", err)
	})
}
