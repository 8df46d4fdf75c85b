package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	bao "github.com/openbao/openbao/api/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/plugins/resources/internal/secretfile/secrettest"
	"github.com/fedhost/fedhost/plugins/resources/openbao/kvtest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// binary is the plugin built once for the whole package.
var binary string

func TestMain(m *testing.M) { plugintest.Main(m, "fedhost-resource-openbao", &binary) }

const rootToken = "s.root-token-of-the-test-server"

// server starts a KV v2 test server with a root token and returns it with the plugin's
// settings for it.
func server(tb testing.TB) (*kvtest.Server, json.RawMessage) {
	tb.Helper()
	srv := kvtest.New("secret", map[string]string{rootToken: ""})
	tb.Cleanup(srv.Close)
	raw, err := json.Marshal(settings{Address: srv.URL, Token: rootToken})
	require.NoError(tb, err)
	return srv, raw
}

func TestConformance(t *testing.T) {
	srv, settings := server(t)
	conformance.Resource(t, binary, secrettest.Case(t, binary, settings))
	require.Empty(t, srv.Keys(), "the kit leaves nothing on the server after a run")
}

// baoClient is a real OpenBao API client of the test server with token.
func baoClient(t *testing.T, srv *kvtest.Server, token string) *bao.KVv2 {
	t.Helper()
	cfg := bao.DefaultConfig()
	cfg.Address = srv.URL
	cfg.MaxRetries = 0
	c, err := bao.NewClient(cfg)
	require.NoError(t, err)
	c.SetToken(token)
	return c.KVv2("secret")
}

func TestServerIsolatesTenants(t *testing.T) {
	t.Parallel()
	srv, settings := server(t)
	rc := secrettest.Start(t, binary, settings)
	ctx := context.Background()
	spec := json.RawMessage(`{"files":{"pw":{"generate":{"length":20}}}}`)
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		_, err := rc.Provision(ctx, resource.Request{Tenant: tenant, Instance: "web", Type: contract.Secret, Spec: spec})
		require.NoError(t, err)
	}
	srv.AddToken("token-a", "fedhost/tenant-a/")
	a := baoClient(t, srv, "token-a")

	own, err := a.Get(ctx, "fedhost/tenant-a/web/pw")
	require.NoError(t, err, "a token scoped to tenant-a reads tenant-a")
	require.Len(t, own.Data["value"], 20)

	for _, path := range []string{"fedhost/tenant-b/web/pw", "fedhost/tenant-b/web", "fedhost/tenant-ab/web/pw"} {
		_, err = a.Get(ctx, path)
		var re *bao.ResponseError
		require.ErrorAs(t, err, &re, path)
		require.Equal(t, 403, re.StatusCode, path)
		require.Equal(t, []string{"1 error occurred:\n\t* permission denied\n\n"}, re.Errors, "a policy gap")
	}
	_, err = a.List(ctx, "fedhost")
	require.Error(t, err, "tenant-a cannot list the tenants")
	_, err = a.Put(ctx, "fedhost/tenant-b/web/pw", map[string]any{"value": "overwritten"})
	require.Error(t, err, "tenant-a cannot write tenant-b")
	_, err = baoClient(t, srv, "wrong-token").Get(ctx, "fedhost/tenant-a/web/pw")
	require.ErrorContains(t, err, "permission denied")
}

func TestVersionsAndReveal(t *testing.T) {
	t.Parallel()
	srv, settings := server(t)
	rc := secrettest.Start(t, binary, settings)
	ctx := context.Background()
	spec := json.RawMessage(`{"files":{"api":{"supplied":true},"pw":{"generate":{"length":16,"encoding":"hex"}}}}`)
	provision := func(value string) contract.SecretResult {
		t.Helper()
		res, err := rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "web", Type: contract.Secret, Spec: spec, Secrets: map[string][]byte{"api": []byte(value)}})
		require.NoError(t, err)
		require.Empty(t, res.Secrets)
		var out contract.SecretResult
		require.NoError(t, json.Unmarshal(res.Data, &out))
		return out
	}
	first := provision("first-value")
	require.Equal(t, 1, first.Files["api"].Version)
	second := provision("second-value")
	require.Equal(t, 2, second.Files["api"].Version, "a changed supplied value is a new KV version")
	require.Equal(t, first.Files["pw"], second.Files["pw"], "a generated value is kept")
	require.Equal(t, second, provision("second-value"))

	v1, err := rc.Reveal(ctx, "acme", "web", first.Files["api"].Ref)
	require.NoError(t, err)
	require.Equal(t, "first-value", string(v1))
	v2, err := rc.Reveal(ctx, "acme", "web", second.Files["api"].Ref)
	require.NoError(t, err)
	require.Equal(t, "second-value", string(v2))

	md, err := baoClient(t, srv, rootToken).GetMetadata(ctx, "fedhost/acme/web/api")
	require.NoError(t, err)
	require.Equal(t, 2, md.CurrentVersion)

	_, err = rc.Reveal(ctx, "acme", "other", second.Files["api"].Ref)
	require.Equal(t, sdk.CodeNotFound, sdk.CodeOf(err))
	missing, err := rc.Reveal(ctx, "acme", "web", "acme/web/api@v7")
	require.Nil(t, missing)
	require.Equal(t, sdk.CodeNotFound, sdk.CodeOf(err))

	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Secret, Retain: true}))
	require.Len(t, srv.Keys(), 2, "retain deletes nothing")
	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Secret}))
	require.Empty(t, srv.Keys(), "deprovision deletes every version and the metadata")
	_, err = rc.Reveal(ctx, "acme", "web", first.Files["api"].Ref)
	require.Equal(t, sdk.CodeNotFound, sdk.CodeOf(err))
}

func TestEntryWithoutMarkerIsRefused(t *testing.T) {
	t.Parallel()
	srv, settings := server(t)
	rc := secrettest.Start(t, binary, settings)
	ctx := context.Background()
	_, err := baoClient(t, srv, rootToken).Put(ctx, "fedhost/acme/web/pw", map[string]any{"value": "someone else's"})
	require.NoError(t, err)
	spec := json.RawMessage(`{"files":{"pw":{"generate":{"length":16}}}}`)
	_, err = rc.Provision(ctx, resource.Request{Tenant: "acme", Instance: "web", Type: contract.Secret, Spec: spec})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "secret/fedhost/acme/web/pw")

	require.NoError(t, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Secret}))
	require.Equal(t, []string{"fedhost/acme/web/pw"}, srv.Keys(), "deprovision leaves what fedhost did not write")
}

func TestTokenFileAndNoTokenInLogs(t *testing.T) {
	t.Parallel()
	srv := kvtest.New("kv", map[string]string{"s.token-from-file": ""})
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("s.token-from-file\n"), 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs bytes.Buffer
	p, err := client.Start(ctx, binary, client.WithLogger(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})))
	require.NoError(t, err)
	defer p.Kill()
	spec := json.RawMessage(`{"files":{"pw":{"generate":{"length":16}}}}`)

	require.NoError(t, p.Configure(ctx, json.RawMessage(fmt.Sprintf(`{"address":%q,"mount":"kv","prefix":"hosting/fedhost","token":"s.wrong-token"}`, srv.URL))))
	_, err = p.Resource().Provision(ctx, resource.Request{Tenant: "acme", Instance: "web", Type: contract.Secret, Spec: spec})
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "settings/token", sdk.FieldOf(err))
	require.NotContains(t, err.Error(), "s.wrong-token")

	require.NoError(t, p.Configure(ctx, json.RawMessage(fmt.Sprintf(`{"address":%q,"mount":"kv","prefix":"hosting/fedhost","token_file":%q}`, srv.URL, file))))
	_, err = p.Resource().Provision(ctx, resource.Request{Tenant: "acme", Instance: "web", Type: contract.Secret, Spec: spec})
	require.NoError(t, err)
	require.Equal(t, []string{"hosting/fedhost/acme/web/pw"}, srv.Keys())

	err = p.Configure(ctx, json.RawMessage(fmt.Sprintf(`{"address":%q,"token":"a","token_file":%q}`, srv.URL, file)))
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "token and token_file together are refused")

	p.Kill()
	require.NotContains(t, logs.String(), "token-from-file")
	require.NotContains(t, logs.String(), "s.wrong-token")
}

// BenchmarkProvision provisions a new instance of six files per iteration, through the plugin.
func BenchmarkProvision(b *testing.B) {
	_, settings := server(b)
	rc := secrettest.Start(b, binary, settings)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		_, err := rc.Provision(ctx, resource.Request{Tenant: "bench", Instance: fmt.Sprintf("i%d", i), Type: contract.Secret, Spec: json.RawMessage(secrettest.Request), Secrets: secrettest.Supplied()})
		require.NoError(b, err)
	}
}

// BenchmarkDeprovision removes an instance of six files per iteration, through the plugin.
func BenchmarkDeprovision(b *testing.B) {
	_, settings := server(b)
	rc := secrettest.Start(b, binary, settings)
	ctx := context.Background()
	spec := json.RawMessage(secrettest.Request)
	for i := 0; b.Loop(); i++ {
		inst := fmt.Sprintf("i%d", i)
		b.StopTimer()
		_, err := rc.Provision(ctx, resource.Request{Tenant: "bench", Instance: inst, Type: contract.Secret, Spec: spec, Secrets: secrettest.Supplied()})
		require.NoError(b, err)
		b.StartTimer()
		require.NoError(b, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "bench", Instance: inst, Type: contract.Secret, Spec: spec}))
	}
}

// provisionWith configures a new plugin process on settings and provisions one file.
func provisionWith(t *testing.T, settings string) error {
	t.Helper()
	rc := secrettest.Start(t, binary, json.RawMessage(settings))
	spec := json.RawMessage(`{"files":{"pw":{"generate":{"length":16}}}}`)
	_, err := rc.Provision(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Secret, Spec: spec})
	return err
}

func TestUnreachableServerNamesAddress(t *testing.T) {
	t.Parallel()
	srv, _ := server(t)
	srv.Close()
	err := provisionWith(t, fmt.Sprintf(`{"address":%q,"token":%q}`, srv.URL, rootToken))
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "settings/address", sdk.FieldOf(err))
	require.ErrorContains(t, err, "check that settings/address is the server's URL")
	require.NotContains(t, err.Error(), rootToken)
}

// TestBadTokenIsToldFromPolicyGap: OpenBao refuses both with 403 permission denied; the
// provider must say which one it is, and what to do about it.
func TestBadTokenIsToldFromPolicyGap(t *testing.T) {
	t.Parallel()
	const badToken = "does not accept the token"
	const policyGap = "accepts the token, but its policy does not allow"
	srv, _ := server(t)
	settings := func(token string) string {
		return fmt.Sprintf(`{"address":%q,"token":%q}`, srv.URL, token)
	}

	srv.AddToken("s.revoked-token", "")
	srv.Revoke("s.revoked-token")
	for _, token := range []string{"s.unknown-token", "s.revoked-token"} {
		err := provisionWith(t, settings(token))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
		require.Equal(t, "settings/token", sdk.FieldOf(err))
		require.ErrorContains(t, err, badToken)
		require.ErrorContains(t, err, "set settings/token to a valid token")
		require.NotContains(t, err.Error(), policyGap)
		require.NotContains(t, err.Error(), token)
	}

	srv.Grant("s.read-only", "fedhost/", kvtest.Read, kvtest.List)
	err := provisionWith(t, settings("s.read-only"))
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "settings/token", sdk.FieldOf(err))
	require.ErrorContains(t, err, policyGap+" create and update on secret/data/fedhost/acme/web/pw")
	require.ErrorContains(t, err, "give the token's policy create, read, update, delete and list on secret/data/fedhost/* and secret/metadata/fedhost/*")
	require.NotContains(t, err.Error(), badToken)

	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("s.read-only\n"), 0o600))
	err = provisionWith(t, fmt.Sprintf(`{"address":%q,"token_file":%q}`, srv.URL, file))
	require.Equal(t, "settings/token_file", sdk.FieldOf(err), "the error blames the setting the token came from: %v", err)
	require.ErrorContains(t, err, policyGap)

	vault := kvtest.New("secret", nil)
	t.Cleanup(vault.Close)
	vault.AnswerLikeVault()
	err = provisionWith(t, fmt.Sprintf(`{"address":%q,"token":"s.unknown-token"}`, vault.URL))
	require.Equal(t, "settings/token", sdk.FieldOf(err), "%v", err)
	require.ErrorContains(t, err, badToken, "Vault's \"invalid token\" is a bad token")
}

// TestConformanceFailsWhenCleanupFails runs the kit in a child test process against a
// server that lets the token do everything but delete tenant A's entries, which only the
// kit's cleanup does: the child must fail, naming the cleanup.
func TestConformanceFailsWhenCleanupFails(t *testing.T) {
	if os.Getenv("FEDHOST_KIT_CLEANUP_CHILD") == "1" {
		srv, settings := server(t)
		srv.Grant(rootToken, "fedhost/conf-a", kvtest.Create, kvtest.Read, kvtest.Update, kvtest.List)
		conformance.Resource(t, binary, secrettest.Case(t, binary, settings))
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceFailsWhenCleanupFails$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FEDHOST_KIT_CLEANUP_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the kit passed although its cleanup failed:\n%s", out)
	require.Contains(t, string(out), "cleanup: deprovision conf-a")
	require.Contains(t, string(out), "failed, so its objects are left on the server")
	require.Contains(t, string(out), "does not allow delete on secret/metadata/fedhost/conf-a")
}
