package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestManagedClusterAdoptsOrStartsFresh starts a cluster, starts it again while the
// postmaster runs (adopted), stops it, and starts it over a stale postmaster.pid.
func TestManagedClusterAdoptsOrStartsFresh(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dataDir), 0o711)) // for the postgres user, as root
	dir := filepath.Join(dataDir, "cluster")

	first, err := startCluster(ctx, dir, "")
	require.NoError(t, err)
	t.Cleanup(first.stop)
	requireAccepts(t, first)
	info, err := os.Stat(filepath.Join(dir, passwordFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	adopted, err := startCluster(ctx, dir, "")
	require.NoError(t, err)
	require.Equal(t, first.pid, adopted.pid, "a running postmaster is adopted, not started again")
	require.Equal(t, first.port, adopted.port)
	adopted.stop()
	// The postmaster is the child of first, whose goroutine reaps it a moment after it exits.
	require.Eventually(t, func() bool { return !first.running() }, 10*time.Second, 20*time.Millisecond, "stop leaves the postmaster running")
	_, err = os.Stat(filepath.Join(dir, "data", "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "a fast shutdown removes postmaster.pid")

	// A postmaster.pid naming a live process that is not postgres (this test) is stale.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "postmaster.pid"), fmt.Appendf(nil, "%d\n%s\n", os.Getpid(), dir), 0o600))
	fresh, err := startCluster(ctx, dir, "")
	require.NoError(t, err)
	t.Cleanup(fresh.stop)
	require.NotEqual(t, first.pid, fresh.pid)
	require.Equal(t, first.port, fresh.port, "the port chosen at the first start is kept")
	requireAccepts(t, fresh)
}

func requireAccepts(t *testing.T, c *cluster) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dsn())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var super bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super))
	require.True(t, super)
}
