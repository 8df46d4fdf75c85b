package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

var tenantCounter atomic.Int64

// newTenant returns a tenant name no other test uses.
func newTenant() string { return fmt.Sprintf("t%d-%d", os.Getpid()%10000, tenantCounter.Add(1)) }

func setup(t testing.TB) (*provider, *redis.Client) {
	t.Helper()
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), settingsJSON()))
	t.Cleanup(p.close)
	admin := adminClient()
	t.Cleanup(func() { admin.Close() })
	return p, admin
}

func provision(t testing.TB, p *provider, tenant, inst string, secrets map[string][]byte) (contract.RedisResult, string) {
	t.Helper()
	res, err := p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: inst, Type: "redis", Spec: json.RawMessage(`{}`), Secrets: secrets})
	require.NoError(t, err)
	var r contract.RedisResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	return r, string(res.Secrets[passwordKey])
}

func TestProvisionResult(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	tenant := newTenant()
	r, pw := provision(t, p, tenant, "cache", nil)
	require.Equal(t, contract.RedisResult{
		Host: "127.0.0.1", Port: r.Port, User: tenant + "-cache",
		Password: contract.SecretRef{Secret: "password"}, KeyPrefix: tenant + ":cache:",
	}, r)
	require.Equal(t, testServer.addr, fmt.Sprintf("%s:%d", r.Host, r.Port))
	require.Len(t, pw, 64, "a generated password is 32 random bytes in hex")

	_, given := provision(t, p, tenant, "cache", map[string][]byte{"password": []byte("operator-chosen")})
	require.Equal(t, "operator-chosen", given)
	c := userClient(testServer.addr, r.User, "operator-chosen")
	defer c.Close()
	require.NoError(t, c.Set(context.Background(), r.KeyPrefix+"k", "v", 0).Err())
}

func TestSettingsHostAndPortHandedOut(t *testing.T) {
	t.Parallel()
	p := &provider{}
	settings := fmt.Sprintf(`{"address":%q,"username":"admin","password":%q,"host":"redis.example.net","port":6380}`, testServer.addr, testServer.adminPassword)
	require.NoError(t, p.Configure(context.Background(), json.RawMessage(settings)))
	defer p.close()
	r, _ := provision(t, p, newTenant(), "main", nil)
	require.Equal(t, "redis.example.net", r.Host)
	require.Equal(t, 6380, r.Port)
}

// A re-provision converges to the exact rules, whatever was changed by hand, and keeps
// the password it is given.
func TestReprovisionConverges(t *testing.T) {
	t.Parallel()
	p, admin := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	r, pw := provision(t, p, tenant, "main", nil)
	before, err := admin.Do(ctx, "ACL", "GETUSER", r.User).Slice()
	require.NoError(t, err)

	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", r.User, "~*", "+@admin", ">another").Err())
	_, again := provision(t, p, tenant, "main", map[string][]byte{"password": []byte(pw)})
	require.Equal(t, pw, again)
	after, err := admin.Do(ctx, "ACL", "GETUSER", r.User).Slice()
	require.NoError(t, err)
	require.Equal(t, before, after)

	c := userClient(testServer.addr, r.User, "another")
	defer c.Close()
	require.ErrorContains(t, c.Ping(ctx).Err(), "WRONGPASS", "the password added by hand must be gone")
}

func TestForeignUserRefused(t *testing.T) {
	t.Parallel()
	p, admin := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	user := tenant + "-app"
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "on", ">theirs", "~*", "+@all").Err())
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })

	_, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "app", Type: "redis"})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, user)

	err = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "app", Type: "redis"})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	_, err = p.Status(ctx, resource.Request{Tenant: tenant, Instance: "app", Type: "redis"})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)

	rules, err := admin.Do(ctx, "ACL", "GETUSER", user).Slice()
	require.NoError(t, err, "the foreign user must still exist")
	require.Contains(t, rules, "~*")
}

// Tenant a-b with instance c and tenant a with instance b-c share the user name a-b-c;
// the marker tells them apart.
func TestSameUserNameOfAnotherTenantRefused(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	provision(t, p, tenant+"-x", "main", nil)
	t.Cleanup(func() {
		p.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant + "-x", Instance: "main", Type: "redis"})
	})
	_, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "x-main", Type: "redis"})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
}

// What the tenant's user may not do, and what applications need that it may.
func TestTenantUserCommands(t *testing.T) {
	t.Parallel()
	p, admin := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	r, pw := provision(t, p, tenant, "main", nil)
	other, _ := provision(t, p, newTenant(), "main", nil)
	require.NoError(t, admin.Set(ctx, other.KeyPrefix+"secret", "theirs", 0).Err())
	c := userClient(testServer.addr, r.User, pw)
	defer c.Close()

	denied := [][]any{
		{"FLUSHALL"},
		{"FLUSHDB"},
		{"CONFIG", "GET", "*"},
		{"CONFIG", "SET", "maxmemory", "1"},
		{"KEYS", "*"},
		{"KEYS", r.KeyPrefix + "*"}, // KEYS is refused as a command, not checked by pattern
		{"SCAN", "0"},
		{"RANDOMKEY"},
		{"ACL", "LIST"},
		{"ACL", "SETUSER", r.User, "~*"},
		{"SELECT", "1"},
		{"MOVE", r.KeyPrefix + "k", "1"},
		{"SWAPDB", "0", "1"},
		{"FUNCTION", "FLUSH"},
		{"SCRIPT", "FLUSH"},
		{"CLIENT", "LIST"},
		{"PUBSUB", "CHANNELS"},
		{"GET", other.KeyPrefix + "secret"},
		{"SET", other.KeyPrefix + "x", "1"},
		{"SET", "unprefixed", "1"},
		{"PUBLISH", other.KeyPrefix + "events", "hi"},
		{"EVAL", "return redis.call('GET', KEYS[1])", "1", other.KeyPrefix + "secret"},
	}
	for _, cmd := range denied {
		err := c.Do(ctx, cmd...).Err()
		require.Error(t, err, "%v", cmd)
		require.True(t, strings.HasPrefix(err.Error(), "NOPERM") || strings.Contains(err.Error(), "can't access"), "%v gave %v, want NOPERM", cmd, err)
	}

	allowed := [][]any{
		{"SET", r.KeyPrefix + "k", "v"},
		{"GET", r.KeyPrefix + "k"},
		{"INFO", "server"},
		{"SELECT", "0"},
		{"PUBLISH", r.KeyPrefix + "events", "hi"},
		{"EVAL", "return redis.call('GET', KEYS[1])", "1", r.KeyPrefix + "k"},
		{"SCRIPT", "LOAD", "return 1"},
		{"CLIENT", "SETNAME", "app"},
		{"ACL", "WHOAMI"},
	}
	for _, cmd := range allowed {
		require.NoError(t, c.Do(ctx, cmd...).Err(), "%v", cmd)
	}
	v, err := admin.Get(ctx, other.KeyPrefix+"secret").Result()
	require.NoError(t, err)
	require.Equal(t, "theirs", v)
}

func TestDeprovisionDeletesOnlyItsPrefix(t *testing.T) {
	t.Parallel()
	p, admin := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	r, _ := provision(t, p, tenant, "a", nil)
	neighbour, _ := provision(t, p, tenant, "ab", nil)
	t.Cleanup(func() {
		p.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: "ab", Type: "redis"})
	})
	pipe := admin.Pipeline()
	for k := range 2500 { // more than two SCAN/UNLINK batches
		pipe.Set(ctx, fmt.Sprintf("%sk%d", r.KeyPrefix, k), "v", 0)
	}
	pipe.Set(ctx, neighbour.KeyPrefix+"k", "v", 0)
	pipe.Set(ctx, tenant+":a", "v", 0)
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "a", Type: "redis"}))
	left, _, err := admin.Scan(ctx, 0, r.KeyPrefix+"*", 100000).Result()
	require.NoError(t, err)
	require.Empty(t, left)
	require.Equal(t, int64(2), admin.Exists(ctx, neighbour.KeyPrefix+"k", tenant+":a").Val())
	require.ErrorIs(t, admin.Do(ctx, "ACL", "GETUSER", r.User).Err(), redis.Nil)

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "a", Type: "redis"}), "a second deprovision is not an error")
}

func TestDeprovisionRetainKeepsKeys(t *testing.T) {
	t.Parallel()
	p, admin := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	r, pw := provision(t, p, tenant, "main", nil)
	c := userClient(testServer.addr, r.User, pw)
	defer c.Close()
	require.NoError(t, c.Set(ctx, r.KeyPrefix+"k", "v", 0).Err())

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "redis", Retain: true}))
	require.Error(t, c.Get(ctx, r.KeyPrefix+"k").Err(), "the user's connection must be closed or refused")
	require.Equal(t, "v", admin.Get(ctx, r.KeyPrefix+"k").Val())
	st, err := p.Status(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "redis"})
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)

	// Without retain, the keys go even though the user is already gone.
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "redis"}))
	require.Zero(t, admin.Exists(ctx, r.KeyPrefix+"k").Val())
}

func TestStatus(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	req := resource.Request{Tenant: tenant, Instance: "main", Type: "redis"}
	st, err := p.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)

	r, _ := provision(t, p, tenant, "main", nil)
	st, err = p.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "ready", st.State)
	var got contract.RedisResult
	require.NoError(t, json.Unmarshal(st.Data, &got))
	require.Equal(t, r, got)
}

// The test server has a config file and no aclfile: users are written to redis.conf.
func TestUsersPersistedToConfigFile(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	tenant := newTenant()
	r, _ := provision(t, p, tenant, "main", nil)
	conf, err := os.ReadFile(testServer.configFile)
	require.NoError(t, err)
	require.Contains(t, string(conf), "user "+r.User+" ")
}

func TestAdminPasswordNeverInErrors(t *testing.T) {
	t.Parallel()
	const wrong = "wrong-admin-password-5f1c"
	cases := []struct {
		name     string
		settings string
		code     sdk.Code
		field    string
	}{
		{"wrong password", fmt.Sprintf(`{"address":%q,"username":"admin","password":%q}`, testServer.addr, wrong), sdk.CodeInvalid, "settings/password"},
		{"unknown user", fmt.Sprintf(`{"address":%q,"username":"nobody","password":%q}`, testServer.addr, wrong), sdk.CodeInvalid, "settings/password"},
		{"disabled default user", fmt.Sprintf(`{"address":%q,"password":%q}`, testServer.addr, wrong), sdk.CodeInvalid, "settings/password"},
		{"unreachable server", fmt.Sprintf(`{"address":"127.0.0.1:1","username":"admin","password":%q}`, wrong), sdk.CodeUnavailable, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &provider{}
			require.NoError(t, p.Configure(context.Background(), json.RawMessage(tc.settings)))
			defer p.close()
			ctx := context.Background()
			_, err := p.Provision(ctx, resource.Request{Tenant: newTenant(), Instance: "main", Type: "redis"})
			require.Error(t, err)
			require.Equal(t, tc.code, sdk.CodeOf(err), "%v", err)
			require.Equal(t, tc.field, sdk.FieldOf(err))
			require.NotContains(t, err.Error(), wrong)
			err = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: newTenant(), Instance: "main", Type: "redis"})
			require.Equal(t, tc.code, sdk.CodeOf(err), "%v", err)
			require.NotContains(t, err.Error(), wrong)
		})
	}
}

// A user without ACL rights is told which rights the admin user needs.
func TestAdminWithoutACLRights(t *testing.T) {
	t.Parallel()
	_, admin := setup(t)
	ctx := context.Background()
	user := newTenant() + "-weak-admin"
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "on", ">weak-pass-1234", "~*", "+@all", "-acl").Err())
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	p := &provider{}
	require.NoError(t, p.Configure(ctx, json.RawMessage(fmt.Sprintf(`{"address":%q,"username":%q,"password":"weak-pass-1234"}`, testServer.addr, user))))
	defer p.close()
	_, err := p.Provision(ctx, resource.Request{Tenant: newTenant(), Instance: "main", Type: "redis"})
	require.Equal(t, "settings/username", sdk.FieldOf(err), "%v", err)
	require.NotContains(t, err.Error(), "weak-pass-1234")
}

func TestSettingsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	cases := []struct {
		settings string
		field    string
	}{
		{`{"address":"no-port","password":"x"}`, "settings/address"},
		{`{"address":"host:99999","password":"x"}`, "settings/address"},
		{`{"address":"host:6379"}`, "settings/password"},
		{`{"address":"host:6379","password":"x","password_file":"/x"}`, "settings/password_file"},
		{`{"address":"host:6379","password_file":"` + filepath.Join(dir, "missing") + `"}`, "settings/password_file"},
		{`{"address":"host:6379","password_file":"` + empty + `"}`, "settings/password_file"},
	}
	for _, tc := range cases {
		p := &provider{}
		err := p.Configure(context.Background(), json.RawMessage(tc.settings))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%s: %v", tc.settings, err)
		require.Equal(t, tc.field, sdk.FieldOf(err), "%s: %v", tc.settings, err)
	}
}

func TestUnconfigured(t *testing.T) {
	t.Parallel()
	_, err := (&provider{}).Provision(context.Background(), resource.Request{Tenant: "t", Instance: "main", Type: "redis"})
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err))
}
