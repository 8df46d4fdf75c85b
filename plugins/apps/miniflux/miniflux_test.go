package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "fedhost-app-miniflux")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	desc := conformance.Plugin(t, bin)
	require.Equal(t, version, desc.Version)
	conformance.App(t, bin,
		conformance.AppCase{Name: "defaults"},
		conformance.AppCase{Name: "team", Domain: "rss.example.net", Config: json.RawMessage(`{
			"adminUsername": "editor", "pollingFrequency": 30, "pollingScheduler": "entry_frequency",
			"cleanupArchiveReadDays": 30, "mediaProxyMode": "all", "fetchYouTubeWatchTime": true, "logLevel": "warning",
			"oidc": {"enable": true, "providerName": "Company login", "disableLocalAuth": true},
			"metrics": {"enable": true, "password": "a metrics password", "allowedNetworks": ["10.0.0.0/8"]}}`)})
}

// schemaDefaults builds the configuration made of the schema's defaults.
func schemaDefaults(t *testing.T) map[string]any {
	var doc struct {
		Properties map[string]struct {
			Default    any                        `json:"default"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(schemaJSON, &doc))
	cfg := map[string]any{}
	for name, p := range doc.Properties {
		if p.Properties != nil {
			sub := map[string]any{}
			for subName, raw := range p.Properties {
				var d map[string]any
				require.NoError(t, json.Unmarshal(raw, &d))
				if def, ok := d["default"]; ok {
					sub[subName] = def
				}
			}
			cfg[name] = sub
			continue
		}
		cfg[name] = p.Default
	}
	return cfg
}

func TestDefaultsAreValidAndMatchTheCode(t *testing.T) {
	t.Parallel()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(schemaJSON)))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("miniflux.json", doc))
	s, err := c.Compile("miniflux.json")
	require.NoError(t, err)

	cfg := schemaDefaults(t)
	require.NoError(t, s.Validate(cfg))
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	parsed, err := parse(raw)
	require.NoError(t, err)
	require.Equal(t, defaults(), parsed, "defaults() and schema.json agree")
	require.NoError(t, s.Validate(map[string]any{}), "the empty configuration is valid too")
}

func fakeResults(t *testing.T, withSSO bool) map[string]json.RawMessage {
	t.Helper()
	res := map[string]any{
		requestDB: contract.PostgreSQLResult{Host: "127.0.0.1", Port: 5432, Database: "acme-miniflux-db", User: "acme-miniflux-db",
			Password: contract.SecretRef{Secret: "acme/miniflux-db/password@v1"}, SSLMode: "disable"},
		requestAdmin: contract.SecretResult{Files: map[string]contract.SecretFileResult{"password": {Ref: "acme/miniflux-admin/password@v1", Version: 1}}},
		requestBackups: contract.S3Result{Endpoint: "http://127.0.0.1:7070", Region: "us-east-1", Buckets: map[string]string{"backups": "acme-backups"},
			Keys: map[string]contract.S3Access{"backup": {AccessKeyID: "AK", SecretAccessKey: contract.SecretRef{Secret: "acme/x/key@v1"}}}},
	}
	if withSSO {
		res[requestSSO] = contract.OIDCResult{Issuer: "https://id.example.org", ClientID: "miniflux", ClientSecret: contract.SecretRef{Secret: "acme/miniflux-sso/client-secret@v1"}}
	}
	out := map[string]json.RawMessage{}
	for name, v := range res {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		out[name] = raw
	}
	return out
}

func TestRequestsAndRenderFollowTheContracts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, sso := range []bool{false, true} {
		cfg := json.RawMessage(`{"adminUsername":"boss","pollingFrequency":15,"oidc":{"enable":` + map[bool]string{false: "false", true: "true"}[sso] + `}}`)
		reqs, err := miniflux{}.Requests(ctx, app.RequestsRequest{Tenant: "acme", Domain: "rss.example.org", Config: cfg})
		require.NoError(t, err)
		names := map[string]bool{}
		for _, r := range reqs {
			require.False(t, names[r.Name], "unique request names")
			names[r.Name] = true
			require.NoError(t, contract.ValidateRequest(r.Type, r.Spec), r.Name)
		}
		require.Equal(t, sso, names[requestSSO])

		results := fakeResults(t, sso)
		for name, raw := range results {
			var typ string
			for _, r := range reqs {
				if r.Name == name {
					typ = r.Type
				}
			}
			if typ != "" {
				require.NoError(t, contract.ValidateResult(typ, raw), name)
			}
		}
		nodes, err := miniflux{}.Render(ctx, app.RenderRequest{Tenant: "acme", Domain: "rss.example.org", Config: cfg, Results: results})
		require.NoError(t, err)
		require.Len(t, nodes, 1)
		require.NoError(t, contract.ValidateRequest(contract.Instance, nodes[0].Spec))
		var node contract.InstanceRequest
		require.NoError(t, json.Unmarshal(nodes[0].Spec, &node))
		require.Equal(t, "miniflux", node.Artifact.Binary)
		require.Equal(t, "boss", node.Env["ADMIN_USERNAME"])
		require.Equal(t, "15", node.Env["POLLING_FREQUENCY"])
		require.Equal(t, "postgres://acme-miniflux-db:${secret:acme/miniflux-db/password@v1}@127.0.0.1:5432/acme-miniflux-db?sslmode=disable",
			node.Files["database-url"].Content)
		require.Equal(t, "${secret:acme/miniflux-admin/password@v1}", node.Files["admin-password"].Content)
		if sso {
			require.Equal(t, "oidc", node.Env["OAUTH2_PROVIDER"])
			require.Equal(t, "${secret:acme/miniflux-sso/client-secret@v1}", node.Files["oidc-client-secret"].Content)
		}
	}
}

func TestRenderWithoutAResultNamesIt(t *testing.T) {
	t.Parallel()
	results := fakeResults(t, false)
	delete(results, requestDB)
	_, err := miniflux{}.Render(context.Background(), app.RenderRequest{Tenant: "acme", Config: json.RawMessage(`{}`), Results: results})
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "results/db", sdk.FieldOf(err))
}

// With single sign-on Miniflux asks for a client whose redirect is its own public URL's
// callback (the host puts the URL in) and lets in its users' and admins' groups, and the
// admin group named in the options; sign-in maps that group to Miniflux's admin role.
func TestSSORequestAndEnv(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := json.RawMessage(`{"oidc":{"enable":true,"adminGroup":"feed-admins"}}`)
	reqs, err := miniflux{}.Requests(ctx, app.RequestsRequest{Tenant: "acme", Domain: "acme.test", Config: cfg})
	require.NoError(t, err)
	var sso contract.OIDCRequest
	for _, r := range reqs {
		if r.Name == requestSSO {
			require.NoError(t, json.Unmarshal(r.Spec, &sso))
		}
	}
	require.Equal(t, []string{"${url:http}oauth2/oidc/callback"}, sso.RedirectURIs)
	require.Equal(t, []string{"miniflux-users", "miniflux-admins", "feed-admins"}, sso.AllowedGroups)

	nodes, err := miniflux{}.Render(ctx, app.RenderRequest{Tenant: "acme", Domain: "acme.test", Config: cfg, Results: fakeResults(t, true)})
	require.NoError(t, err)
	var node contract.InstanceRequest
	require.NoError(t, json.Unmarshal(nodes[0].Spec, &node))
	require.Equal(t, "groups", node.Env["OAUTH2_GROUP_CLAIM"])
	require.Equal(t, "groups", node.Env["OAUTH2_ADDITIONAL_SCOPES"], "Miniflux asks for the groups scope, without which no groups claim comes")
	require.Equal(t, "feed-admins", node.Env["OAUTH2_ADMIN_GROUP"])
}
