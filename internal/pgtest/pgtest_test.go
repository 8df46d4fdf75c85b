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
