package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

func compileSchema(t *testing.T, v string) *jsonschema.Schema {
	t.Helper()
	raw, err := schemaFor(v)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("miniflux.json", doc))
	s, err := c.Compile("miniflux.json")
	require.NoError(t, err)
	return s
}

func TestFetcherComesWithVersion236(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"2.3.5": false, "2.2.9": false, "v2.3.5": false, "2.3.6-rc.1": false, "2.3.7-rc.1": true,
		"2.3.6": true, "2.3.10": true, "2.4.0": true, "3.0": true, "2.3": false} {
		require.Equal(t, want, hasFetcher(v), v)
	}
}

// The schema a version answers has the flat fetch options before 2.3.6 and fetcher from
// it on; each refuses the other's shape.
func TestSchemaDependsOnTheVersion(t *testing.T) {
	t.Parallel()
	flat := map[string]any{"httpClientTimeout": 45, "fetcherAllowPrivateNetworks": true}
	nested := map[string]any{"fetcher": map[string]any{"timeout": 45, "allowPrivateNetworks": true}}
	old, cur := compileSchema(t, "2.3.5"), compileSchema(t, "2.3.6")
	require.NoError(t, old.Validate(flat))
	require.Error(t, old.Validate(nested), "2.3.5 has no fetcher")
	require.NoError(t, cur.Validate(nested))
	require.Error(t, cur.Validate(flat), "2.3.6 has no flat fetch options")
	require.Error(t, cur.Validate(map[string]any{"fetcher": map[string]any{"timeout": 0}}), "the bounds moved with the option")
	require.NoError(t, cur.Validate(map[string]any{}))
	raw, err := schemaFor("2.3.6")
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"httpClientTimeout":{`)
}

// render renders cfg as version v and returns the node's environment.
func render(t *testing.T, v, cfg string) map[string]string {
	t.Helper()
	defer func(was string) { version = was }(version)
	version = v
	nodes, err := miniflux{}.Render(context.Background(), app.RenderRequest{Tenant: "acme", Domain: "rss.example.org",
		Config: json.RawMessage(cfg), Results: fakeResults(t, false)})
	require.NoError(t, err)
	var node contract.InstanceRequest
	require.NoError(t, json.Unmarshal(nodes[0].Spec, &node))
	return node.Env
}

// Not parallel: it sets version, which the parallel tests read after it.
func TestFetchOptionsSetMinifluxsVariablesInBothShapes(t *testing.T) {
	flat := render(t, "2.3.5", `{"httpClientTimeout": 45, "fetcherAllowPrivateNetworks": true}`)
	nested := render(t, "2.3.6", `{"fetcher": {"timeout": 45, "allowPrivateNetworks": true}}`)
	for _, env := range []map[string]string{flat, nested} {
		require.Equal(t, "45", env["HTTP_CLIENT_TIMEOUT"])
		require.Equal(t, "true", env["FETCHER_ALLOW_PRIVATE_NETWORKS"])
	}
	require.Equal(t, flat, nested)
	require.Equal(t, "20", render(t, "2.3.6", `{}`)["HTTP_CLIENT_TIMEOUT"], "the default timeout stays")
	require.Equal(t, "false", render(t, "2.3.6", `{"fetcher": {}}`)["FETCHER_ALLOW_PRIVATE_NETWORKS"])

	// A configuration in the other version's shape is refused, naming the option.
	defer func(was string) { version = was }(version)
	version = "2.3.6"
	_, err := parse(json.RawMessage(`{"httpClientTimeout": 45}`))
	require.ErrorContains(t, err, "httpClientTimeout is fetcher.timeout")
	version = "2.3.5"
	_, err = parse(json.RawMessage(`{"fetcher": {"timeout": 45}}`))
	require.ErrorContains(t, err, "option fetcher comes with Miniflux plugin 2.3.6")
}

// 2.3.6 declares where each flat option went, since 2.3.6; the renames move a 2.3.5
// configuration into one 2.3.6's schema takes, with the same values.
func TestRenamesMoveTheFlatOptionsIntoFetcher(t *testing.T) {
	defer func(was string) { version = was }(version)
	version = "2.3.5"
	none, err := miniflux{}.Renames(context.Background())
	require.NoError(t, err)
	require.Empty(t, none, "2.3.5 renamed nothing")
	version = "2.3.6"
	renames, err := miniflux{}.Renames(context.Background())
	require.NoError(t, err)
	require.Equal(t, []app.Rename{
		{From: "/httpClientTimeout", To: "/fetcher/timeout", Since: "2.3.6"},
		{From: "/fetcherAllowPrivateNetworks", To: "/fetcher/allowPrivateNetworks", Since: "2.3.6"},
	}, renames)

	opts := map[string]any{"httpClientTimeout": float64(45), "fetcherAllowPrivateNetworks": true, "pollingFrequency": float64(30)}
	require.NoError(t, compileSchema(t, "2.3.5").Validate(opts))
	for _, r := range renames {
		v := opts[strings.TrimPrefix(r.From, "/")]
		delete(opts, strings.TrimPrefix(r.From, "/"))
		f, _ := opts["fetcher"].(map[string]any)
		if f == nil {
			f = map[string]any{}
			opts["fetcher"] = f
		}
		f[strings.TrimPrefix(r.To, "/fetcher/")] = v
	}
	require.NoError(t, compileSchema(t, "2.3.6").Validate(opts))
	raw, err := json.Marshal(opts)
	require.NoError(t, err)
	env := render(t, "2.3.6", string(raw))
	require.Equal(t, "45", env["HTTP_CLIENT_TIMEOUT"])
	require.Equal(t, "true", env["FETCHER_ALLOW_PRIVATE_NETWORKS"])
	require.Equal(t, "30", env["POLLING_FREQUENCY"])
}
