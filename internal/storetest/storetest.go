// Package storetest runs a test on both databases the store speaks, SQLite and a real
// PostgreSQL (started by internal/pgtest), and gives tests what they share: an opened
// store, the database behind it outside the store, and a settable clock.
//
// A test package that uses it calls pgtest.Main from its TestMain.
package storetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
)

// Drivers runs test once on SQLite and once on PostgreSQL, in parallel, each on a new
// empty database.
func Drivers(t *testing.T, test func(t *testing.T, cfg store.Config)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		test(t, store.Config{Database: pgtest.DSN(t)})
	})
}

// Open opens (and migrates) the store of cfg, closed at the end of the test.
func Open(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// RawDB opens the database behind cfg with database/sql, outside the store, to read or
// tamper with what the store wrote; closed at the end of the test.
func RawDB(t testing.TB, cfg store.Config) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", cfg.Database
	if cfg.Database == "sqlite" {
		driver, dsn = "sqlite", filepath.Join(cfg.DataDir, "fedhost.db")
	}
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// Clock is a clock a test sets; safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now tells the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
