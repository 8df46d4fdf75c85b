// Package store keeps fedhost's state in SQLite (one machine) or PostgreSQL
// (several fedhost processes), through gorm. Open migrates the schema forward
// and refuses a database migrated by a newer fedhost. It also migrates River's
// tables, so the queue can run on the same database.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go
)

// Config says where the store lives.
type Config struct {
	// Database is "sqlite" (the default), for the file <DataDir>/fedhost.db,
	// or a postgres:// DSN.
	Database string
	// DataDir is the directory of the SQLite file; created if missing.
	DataDir string
}

// Store is fedhost's database. It is safe for concurrent use.
type Store struct {
	db     *gorm.DB
	gormDB *sql.DB

	// Exactly one of these is set: the pool River works through.
	riverSQLite *sql.DB
	riverPgx    *pgxpool.Pool
}

// Open connects to the database cfg names, migrates its schema and River's
// tables to the versions this binary knows, and returns the store.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	switch {
	case cfg.Database == "" || cfg.Database == "sqlite":
		return openSQLite(ctx, cfg.DataDir)
	case strings.HasPrefix(cfg.Database, "postgres://"), strings.HasPrefix(cfg.Database, "postgresql://"):
		return openPostgres(ctx, cfg.Database)
	default:
		return nil, fmt.Errorf("database: unsupported value %q: use \"sqlite\" or a postgres:// DSN", redact(cfg.Database))
	}
}

// redact hides a password in a mistyped DSN before it is shown.
func redact(database string) string {
	if u, err := url.Parse(database); err == nil && u.User != nil {
		return u.Redacted()
	}
	return database
}

func gormConfig() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard, // errors are returned, and a query may carry values that are not ours to log
		NowFunc:                now,
		SkipDefaultTransaction: true,
	}
}

// sqliteParams apply to every SQLite connection. Transactions begin
// IMMEDIATE so a transaction that reads then writes holds the write lock from
// the start and waits out busy_timeout, instead of failing with SQLITE_BUSY
// when another connection wrote in between.
const sqliteParams = "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"

// openSQLite opens the file twice: a pool for gorm and a one-connection pool
// for River, as River's SQLite driver asks. Sharing River's single connection
// would make every store call (a UI read, a build event) queue behind River's
// fetches and heartbeats, and a store transaction that waited on a River call
// (or the reverse) would deadlock. With WAL, separate pools read concurrently;
// SQLite still has one writer at a time, and BEGIN IMMEDIATE plus busy_timeout
// turns contention into short waits. The cost is that a build row and its
// River job cannot be written in one transaction.
func openSQLite(ctx context.Context, dataDir string) (*Store, error) {
	if dataDir == "" {
		return nil, errors.New(`data_dir: must be set when database is "sqlite"`)
	}
	// Others may pass through the data dir but not list it: plugins that run servers as
	// unprivileged users (the managed PostgreSQL cluster) keep their state below it.
	if err := os.MkdirAll(dataDir, 0o711); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	path := filepath.Join(dataDir, "fedhost.db")
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := createPrivate(f); err != nil {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
	}
	gormDB, err := sql.Open("sqlite", path+sqliteParams)
	if err != nil {
		return nil, fmt.Errorf("database: opening %s: %w", path, err)
	}
	gormDB.SetMaxOpenConns(4) // readers run concurrently under WAL; writers queue on the file lock anyway
	riverDB, err := sql.Open("sqlite", path+sqliteParams)
	if err != nil {
		gormDB.Close()
		return nil, fmt.Errorf("database: opening %s: %w", path, err)
	}
	riverDB.SetMaxOpenConns(1)
	s := &Store{gormDB: gormDB, riverSQLite: riverDB}

	// gorm's SQLite dialector is handed the modernc.org/sqlite pool, so the
	// cgo driver it would open by default is never used.
	s.db, err = gorm.Open(sqlite.Dialector{Conn: gormDB}, gormConfig())
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("database: opening %s: %w", path, err)
	}
	if err := migrate(ctx, s.db); err != nil {
		s.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	if err := migrateRiver(ctx, riversqlite.New(riverDB)); err != nil {
		s.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	return s, nil
}

// migrationLock is the PostgreSQL advisory lock key that lets one fedhost
// process migrate at a time ("fedhost" in ASCII).
const migrationLock = 0x66656468_6f7374

// openPostgres uses one pgx pool for River and, through database/sql, gorm,
// so a process holds one set of connections.
func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	// pgxpool's default (4 on a small machine) is too few once River's
	// listener holds one and every worker writes build events.
	if !strings.Contains(dsn, "pool_max_conns") {
		pcfg.MaxConns = 10
	}
	// Read timestamps in UTC, as SQLite returns them, rather than time.Local.
	pcfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		conn.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	}
	where := fmt.Sprintf("PostgreSQL database %q at %s:%d", pcfg.ConnConfig.Database, pcfg.ConnConfig.Host, pcfg.ConnConfig.Port)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("database: %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database: connecting to %s: %w", where, err)
	}
	s := &Store{gormDB: stdlib.OpenDBFromPool(pool), riverPgx: pool}
	s.db, err = gorm.Open(postgres.New(postgres.Config{Conn: s.gormDB}), gormConfig())
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("database: %s: %w", where, err)
	}

	err = func() error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("waiting for the migration lock: %w", err)
		}
		// Unlock with a fresh context: ctx may be what ended the migration.
		defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock)
		if err := migrate(ctx, s.db); err != nil {
			return err
		}
		return migrateRiver(ctx, riverpgxv5.New(pool))
	}()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("database: %s: %w", where, err)
	}
	return s, nil
}

func migrateRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx]) error {
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fmt.Errorf("migrating the queue tables: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrating the queue tables: %w", err)
	}
	return nil
}

// Close closes the database connections. Stop the queue first.
func (s *Store) Close() error {
	var errs []error
	if s.gormDB != nil {
		errs = append(errs, s.gormDB.Close())
	}
	if s.riverSQLite != nil {
		errs = append(errs, s.riverSQLite.Close())
	}
	if s.riverPgx != nil {
		s.riverPgx.Close()
	}
	return errors.Join(errs...)
}

// RiverSQLite returns the connection pool River uses on SQLite, or nil on
// PostgreSQL.
func (s *Store) RiverSQLite() *sql.DB { return s.riverSQLite }

// RiverPgx returns the connection pool River uses on PostgreSQL, or nil on
// SQLite.
func (s *Store) RiverPgx() *pgxpool.Pool { return s.riverPgx }

// createPrivate makes sure a database file exists with mode 0600 before SQLite opens it:
// SQLite would create it readable by every user of the machine.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
