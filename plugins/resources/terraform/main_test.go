package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/host/tfstate"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

// binary is the plugin built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("terraform"); err != nil {
		fmt.Fprintln(os.Stderr, "these tests run Terraform: install Terraform 1.11 (or put terraform on PATH)")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "fedhost-resource-terraform-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "fedhost-resource-terraform")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	pgtest.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// host is the host's real state backend (host/api on a store), on a loopback port.
type host struct {
	address  string // state_address
	stateKey string
	store    *store.Store
}

func startHost(t testing.TB) host {
	t.Helper()
	dir := t.TempDir()
	st := storetest.Open(t, store.Config{Database: "sqlite", DataDir: dir})
	keys, err := tfstate.LoadOrCreate(dir)
	require.NoError(t, err)
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Store: st, TerraformState: keys})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(time.Second) })
	return host{address: "http://" + ln.Addr().String() + "/api/v1/terraform/state", stateKey: keys.StateKey(), store: st}
}

// postgres is a database of the shared test server the module's psql works against.
type postgres struct {
	superDSN, host string
	port           int
}

func newPostgres(t testing.TB) postgres {
	t.Helper()
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return postgres{superDSN: dsn, host: u.Hostname(), port: port}
}

func moduleDir(name string) string {
	dir, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return dir
}

// settingsFor gives the postgresql type the module in testdata/dir, against pg.
func settingsFor(t testing.TB, h host, pg postgres, dir string, extra map[string]any) json.RawMessage {
	t.Helper()
	s := map[string]any{
		"modules": map[string]any{contract.PostgreSQL: map[string]any{
			"dir":       moduleDir(dir),
			"variables": map[string]any{"admin_url": pg.superDSN, "pg_host": pg.host, "pg_port": pg.port},
		}},
		"state_address": h.address,
		"state_key":     h.stateKey,
	}
	for k, v := range extra {
		s[k] = v
	}
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	return raw
}

func resultOf(p conformance.Provisioned) (contract.PostgreSQLResult, error) {
	var r contract.PostgreSQLResult
	return r, json.Unmarshal(p.Result, &r)
}

// connectAs connects with the credentials of from to the database of to.
func connectAs(ctx context.Context, from, to conformance.Provisioned) (*pgx.Conn, error) {
	rf, err := resultOf(from)
	if err != nil {
		return nil, err
	}
	rt, err := resultOf(to)
	if err != nil {
		return nil, err
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(rf.User, string(from.Secrets[rf.Password.Secret])),
		Host: net.JoinHostPort(rf.Host, strconv.Itoa(rf.Port)), Path: "/" + rt.Database, RawQuery: "sslmode=" + rf.SSLMode}
	return pgx.Connect(ctx, u.String())
}

// connectSuper connects as the superuser to database.
func (pg postgres) connectSuper(ctx context.Context, database string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(pg.superDSN)
	if err != nil {
		return nil, err
	}
	cfg.Database = database
	return pgx.ConnectConfig(ctx, cfg)
}

func (pg postgres) databaseExists(ctx context.Context, name string) (bool, error) {
	conn, err := pg.connectSuper(ctx, "postgres")
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n)
	return n == 1, err
}

func TestConformance(t *testing.T) {
	h := startHost(t)
	pg := newPostgres(t)
	conformance.Resource(t, binary, conformance.ResourceCase{
		Type:         contract.PostgreSQL,
		Settings:     settingsFor(t, h, pg, "postgresql", nil),
		Request:      json.RawMessage(`{}`),
		Invalid:      json.RawMessage(`{"extensions":["Not An Extension"]}`),
		InvalidField: "request/extensions/0",
		Access: func(ctx context.Context, from, to conformance.Provisioned) error {
			conn, err := connectAs(ctx, from, to)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS access_check (v text)")
			return err
		},
		Exists: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			return pg.databaseExists(ctx, r.Database)
		},
		Seed: func(ctx context.Context, p conformance.Provisioned) error {
			conn, err := connectAs(ctx, p, p)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('seeded')")
			return err
		},
		DataKept: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			conn, err := pg.connectSuper(ctx, r.Database)
			if err != nil {
				return false, nil
			}
			defer conn.Close(ctx)
			var v string
			if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil {
				return false, nil
			}
			return v == "seeded", nil
		},
	})
}
