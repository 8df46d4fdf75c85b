package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// buildPlugin builds the plugin binary into dir.
func buildPlugin(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "fedhost-resource-postgresql")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// sharedServer is a database on the pgtest server, and an admin role with only
// CREATEROLE and CREATEDB, the way a hosting provider sets up a shared server.
type sharedServer struct {
	superDSN string // a superuser, for the tests' own checks
	adminDSN string // the plugin's admin
}

func newSharedServer(t testing.TB) sharedServer {
	t.Helper()
	ctx := context.Background()
	super := pgtest.DSN(t)
	conn, err := pgx.Connect(ctx, super)
	require.NoError(t, err)
	defer conn.Close(ctx)
	role, password := "admin_"+strings.ToLower(rand.Text()[:10]), rand.Text()
	_, err = conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN CREATEROLE CREATEDB PASSWORD %s", ident(role), literal(password)))
	require.NoError(t, err)
	u, err := url.Parse(super)
	require.NoError(t, err)
	u.User = url.UserPassword(role, password)
	return sharedServer{superDSN: super, adminDSN: u.String()}
}

// checks are the conformance functions, against a server whose superuser DSN superDSN
// gives (a function: the managed cluster is known only once the plugin started it).
type checks struct {
	superDSN func(context.Context) (string, error)
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
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(rf.User, string(from.Secrets[rf.Password.Secret])),
		Host:     net.JoinHostPort(rf.Host, strconv.Itoa(rf.Port)),
		Path:     "/" + rt.Database,
		RawQuery: "sslmode=" + rf.SSLMode,
	}
	return pgx.Connect(ctx, u.String())
}

// connectSuper connects as the superuser to the database of p.
func (c checks) connectSuper(ctx context.Context, p conformance.Provisioned) (*pgx.Conn, error) {
	dsn, err := c.superDSN(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	r, err := resultOf(p)
	if err != nil {
		return nil, err
	}
	cfg.Database = r.Database
	return pgx.ConnectConfig(ctx, cfg)
}

func (c checks) access(ctx context.Context, from, to conformance.Provisioned) error {
	conn, err := connectAs(ctx, from, to)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		"CREATE TABLE IF NOT EXISTS access_check (v text)",
		"INSERT INTO access_check VALUES ('written')",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM access_check WHERE v = 'written'").Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the row written is not read back")
	}
	return nil
}

func (c checks) exists(ctx context.Context, p conformance.Provisioned) (bool, error) {
	dsn, err := c.superDSN(ctx)
	if err != nil {
		return false, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	r, err := resultOf(p)
	if err != nil {
		return false, err
	}
	var ok bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", r.Database).Scan(&ok)
	return ok, err
}

func (c checks) seed(ctx context.Context, p conformance.Provisioned) error {
	conn, err := connectAs(ctx, p, p)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('seed')")
	return err
}

func (c checks) dataKept(ctx context.Context, p conformance.Provisioned) (bool, error) {
	conn, err := c.connectSuper(ctx, p)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil {
		return false, err
	}
	return v == "seed", nil
}

func (c checks) resourceCase(settings any) conformance.ResourceCase {
	raw, _ := json.Marshal(settings)
	return conformance.ResourceCase{
		Type:         "postgresql",
		Settings:     raw,
		Request:      json.RawMessage(`{"extensions":["citext"]}`),
		Invalid:      json.RawMessage(`{"extensions":["citext","plpython3u"]}`),
		InvalidField: "request/extensions/1",
		Access:       c.access,
		Exists:       c.exists,
		Seed:         c.seed,
		DataKept:     c.dataKept,
	}
}
