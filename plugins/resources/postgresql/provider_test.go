package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// newSharedProvider is the provider configured on a fresh shared server, in process.
func newSharedProvider(t testing.TB) (*provider, sharedServer) {
	t.Helper()
	srv := newSharedServer(t)
	p := &provider{}
	settings, _ := json.Marshal(map[string]any{"url": srv.adminDSN})
	require.NoError(t, p.Configure(context.Background(), settings))
	t.Cleanup(p.close)
	return p, srv
}

func superExec(t *testing.T, srv sharedServer, stmt string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.superDSN)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	require.NoError(t, err)
}

func provisionReq(tenant, instance string, secrets map[string][]byte) resource.Request {
	return resource.Request{Tenant: tenant, Instance: instance, Type: "postgresql", Spec: json.RawMessage(`{}`), Secrets: secrets}
}

// loginAs connects with a result's credentials to its database.
func loginAs(ctx context.Context, res resource.Result, password string) error {
	var r contract.PostgreSQLResult
	if err := json.Unmarshal(res.Data, &r); err != nil {
		return err
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(r.User, password), Host: fmt.Sprintf("%s:%d", r.Host, r.Port), Path: "/" + r.Database, RawQuery: "sslmode=disable"}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func TestProvisionRefusesObjectsWithoutMarker(t *testing.T) {
	t.Parallel()
	p, srv := newSharedProvider(t)
	tests := []struct {
		name, tenant, setup string
	}{
		{"database without marker", "nomark-db", `CREATE DATABASE "nomark-db-main"`},
		{"role without marker", "nomark-role", `CREATE ROLE "nomark-role-main"`},
		{"database marked for another tenant", "othermark", `CREATE DATABASE "othermark-main"; COMMENT ON DATABASE "othermark-main" IS 'fedhost tenant=other instance=main'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			for _, stmt := range strings.Split(tt.setup, "; ") {
				superExec(t, srv, stmt)
			}
			_, err := p.Provision(ctx, provisionReq(tt.tenant, "main", nil))
			require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), tt.tenant+"-main")

			err = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tt.tenant, Instance: "main", Type: "postgresql"})
			require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "deprovision must not drop what is not fedhost's: %v", err)
			var n int
			conn, err := pgx.Connect(ctx, srv.superDSN)
			require.NoError(t, err)
			defer conn.Close(ctx)
			require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_database WHERE datname = $1) + (SELECT count(*) FROM pg_roles WHERE rolname = $1)`, tt.tenant+"-main").Scan(&n))
			require.Equal(t, 1, n, "the refused provision created or dropped something")
		})
	}
}

func TestProvisionAdoptsDatabaseOfInterruptedProvision(t *testing.T) {
	t.Parallel()
	p, srv := newSharedProvider(t)
	ctx := context.Background()
	res, err := p.Provision(ctx, provisionReq("interrupted", "main", nil))
	require.NoError(t, err)
	// What a provision stopped between CREATE DATABASE and COMMENT leaves.
	superExec(t, srv, `COMMENT ON DATABASE "interrupted-main" IS NULL`)
	again, err := p.Provision(ctx, provisionReq("interrupted", "main", res.Secrets))
	require.NoError(t, err)
	require.NoError(t, loginAs(ctx, again, string(again.Secrets[passwordKey])))
}

func TestExtensionNotAllowedNamesField(t *testing.T) {
	t.Parallel()
	p, _ := newSharedProvider(t)
	spec := json.RawMessage(`{"extensions":["citext","plpython3u"]}`)
	req := provisionReq("ext", "main", nil)
	req.Spec = spec
	_, err := p.Provision(context.Background(), req)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "request/extensions/1", sdk.FieldOf(err))
	require.Contains(t, err.Error(), "plpython3u")

	err = p.Validate(context.Background(), "postgresql", spec)
	require.Equal(t, "request/extensions/1", sdk.FieldOf(err))
	require.NoError(t, p.Validate(context.Background(), "postgresql", json.RawMessage(`{"extensions":["pg_trgm","hstore"]}`)))
}

func TestExtensionsAreCreated(t *testing.T) {
	t.Parallel()
	p, srv := newSharedProvider(t)
	ctx := context.Background()
	req := provisionReq("exts", "main", nil)
	req.Spec = json.RawMessage(`{"extensions":["pg_trgm","hstore"]}`)
	_, err := p.Provision(ctx, req)
	require.NoError(t, err)
	cfg, err := pgx.ParseConfig(srv.superDSN)
	require.NoError(t, err)
	cfg.Database = "exts-main"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_extension WHERE extname IN ('pg_trgm', 'hstore')`).Scan(&n))
	require.Equal(t, 2, n)
}

func TestPasswordIsReusedWhenGivenBack(t *testing.T) {
	t.Parallel()
	p, _ := newSharedProvider(t)
	ctx := context.Background()
	first, err := p.Provision(ctx, provisionReq("pwreuse", "main", nil))
	require.NoError(t, err)
	pw := first.Secrets[passwordKey]
	require.Len(t, pw, 43, "32 random bytes, base64url")

	again, err := p.Provision(ctx, provisionReq("pwreuse", "main", map[string][]byte{passwordKey: pw}))
	require.NoError(t, err)
	require.Equal(t, pw, again.Secrets[passwordKey])
	require.JSONEq(t, string(first.Data), string(again.Data))
	require.NoError(t, loginAs(ctx, again, string(pw)))

	// Without it, a new password is made, and the old one stops working.
	fresh, err := p.Provision(ctx, provisionReq("pwreuse", "main", nil))
	require.NoError(t, err)
	require.NotEqual(t, pw, fresh.Secrets[passwordKey])
	require.NoError(t, loginAs(ctx, fresh, string(fresh.Secrets[passwordKey])))
	require.Error(t, loginAs(ctx, fresh, string(pw)))
}

func TestErrorsNeverShowPasswords(t *testing.T) {
	t.Parallel()
	srv := newSharedServer(t)
	u, err := url.Parse(srv.adminDSN)
	require.NoError(t, err)
	wrong := "Wr0ngPassw0rd-" + strings.Repeat("x", 12)
	u.User = url.UserPassword(u.User.Username(), wrong)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	down := *u
	down.Host = fmt.Sprintf("127.0.0.1:%d", closedPort)

	tests := []struct {
		name     string
		url      string
		code     sdk.Code
		hostPort string
	}{
		{"wrong admin password", u.String(), sdk.CodeInvalid, u.Host},
		{"server down", down.String(), sdk.CodeUnavailable, down.Host},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &provider{}
			settings, _ := json.Marshal(map[string]any{"url": tt.url})
			require.NoError(t, p.Configure(context.Background(), settings))
			defer p.close()
			given := []byte("GivenTenantPassword-0123456789")
			_, err := p.Provision(context.Background(), provisionReq("errs", "main", map[string][]byte{passwordKey: given}))
			require.Equal(t, tt.code, sdk.CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), tt.hostPort)
			require.NotContains(t, err.Error(), wrong)
			require.NotContains(t, err.Error(), string(given))
		})
	}
}

func TestNameLengthLimit(t *testing.T) {
	t.Parallel()
	tenant := strings.Repeat("t", 32)
	tests := []struct {
		instance string
		ok       bool
	}{
		{strings.Repeat("i", 30), true}, // 63 bytes
		{strings.Repeat("i", 31), false},
		{strings.Repeat("i", 63), false},
	}
	for _, tt := range tests {
		name, marker, err := names(tenant, tt.instance)
		if tt.ok {
			require.NoError(t, err)
			require.Len(t, name, 63)
			require.Equal(t, "fedhost tenant="+tenant+" instance="+tt.instance, marker)
			continue
		}
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
		require.Equal(t, "instance", sdk.FieldOf(err))
	}

	// The longest name works on a real server, quoted.
	p, _ := newSharedProvider(t)
	res, err := p.Provision(context.Background(), provisionReq(tenant, strings.Repeat("i", 30), nil))
	require.NoError(t, err)
	require.NoError(t, loginAs(context.Background(), res, string(res.Secrets[passwordKey])))
}

func TestRetainKeepsDatabaseAndTakesAccess(t *testing.T) {
	t.Parallel()
	p, _ := newSharedProvider(t)
	ctx := context.Background()
	req := provisionReq("retain", "main", nil)
	res, err := p.Provision(ctx, req)
	require.NoError(t, err)
	pw := string(res.Secrets[passwordKey])

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "retain", Instance: "main", Type: "postgresql", Retain: true}))
	require.Error(t, loginAs(ctx, res, pw), "the role can still log in after a retained deprovision")
	st, err := p.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)

	req.Secrets = res.Secrets
	_, err = p.Provision(ctx, req)
	require.NoError(t, err)
	require.NoError(t, loginAs(ctx, res, pw), "provisioning again restores access")
	st, err = p.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "ready", st.State)
	require.JSONEq(t, string(res.Data), string(st.Data))
}

func TestSettingsAreChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, settings, field string
	}{
		{"url and url_file", `{"url":"postgres://a@h/db","url_file":"/x"}`, "settings/url_file"},
		{"managed with url", `{"managed":true,"url":"postgres://a@h/db"}`, "settings/managed"},
		{"not managed without url", `{"managed":false}`, "settings/url"},
		{"url_file missing", `{"url_file":"/nonexistent/fedhost-dsn"}`, "settings/url_file"},
		{"bin_dir with url", `{"url":"postgres://a@h/db","bin_dir":"/usr/bin"}`, "settings/bin_dir"},
		{"host in managed mode", `{"host":"db.example"}`, "settings/host"},
		{"url that is no DSN", `{"url":"postgres://a:s3cr3tpw@h:notaport/db"}`, "settings/url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := (&provider{}).Configure(context.Background(), json.RawMessage(tt.settings))
			require.Equal(t, tt.field, sdk.FieldOf(err), "%v", err)
			require.NotContains(t, err.Error(), "s3cr3tpw")
		})
	}
}

func TestSharedSettingsHandOutHost(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "dsn")
	require.NoError(t, os.WriteFile(file, []byte("postgres://admin:pw@10.0.0.5:6432/postgres\n"), 0o600))
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), json.RawMessage(fmt.Sprintf(`{"url_file":%q,"host":"db.internal","port":5432}`, file))))
	defer p.close()
	r := p.srv.result("t-i")
	require.Equal(t, contract.PostgreSQLResult{Host: "db.internal", Port: 5432, Database: "t-i", User: "t-i", Password: contract.SecretRef{Secret: passwordKey}, SSLMode: "require"}, r)
	require.Equal(t, "10.0.0.5:6432", p.srv.adminAddress())
}

func TestManagedClusterNeedsReachableDataDir(t *testing.T) {
	t.Parallel()
	// t.TempDir's parent is 0700: a switched user cannot enter it.
	dataDir := t.TempDir()
	u := &osUser{name: "nobody", uid: 65534, gid: 65534, switched: true}
	err := u.prepare(filepath.Join(dataDir, "cluster"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "cannot enter "+filepath.Dir(dataDir))
	require.Contains(t, err.Error(), "chmod o+x "+filepath.Dir(dataDir))
}

func TestSCRAMVerifierLogsIn(t *testing.T) {
	t.Parallel()
	v, err := scramVerifier("pencil")
	require.NoError(t, err)
	require.Regexp(t, `^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$`, v)
	_, err = passwordOf(map[string][]byte{passwordKey: []byte("tab\there")})
	require.Equal(t, "secrets/password", sdk.FieldOf(err))
}
