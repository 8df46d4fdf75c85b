package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestDSNGivesSeparateEmptyDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	first, second := pgtest.DSN(t), pgtest.DSN(t)
	require.NotEqual(t, first, second)

	conn, err := pgx.Connect(ctx, first)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE only_in_first (id int)")
	require.NoError(t, err)

	var super bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super))
	require.True(t, super, "the database owner should be a superuser")

	other, err := pgx.Connect(ctx, second)
	require.NoError(t, err)
	defer other.Close(ctx)
	var tables int
	require.NoError(t, other.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables))
	require.Zero(t, tables, "a new database should be empty")
}

// A server of the test's own stops as a crash would, cutting its clients, and starts
// again on the same address with the data committed before.
func TestServerRestartsOnTheSameAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	dsn := srv.DSN()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (7)")
	require.NoError(t, err)

	srv.Stop()
	_, err = conn.Exec(ctx, "SELECT 1")
	require.Error(t, err, "the stop cuts the connection")
	_, err = pgx.Connect(ctx, dsn)
	require.Error(t, err, "nothing listens while it is stopped")

	srv.Start()
	again, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer again.Close(ctx)
	var id int
	require.NoError(t, again.QueryRow(ctx, "SELECT id FROM kept").Scan(&id))
	require.Equal(t, 7, id)
}
