package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/tfstate"
	"github.com/fedhost/fedhost/sdk"
)

// An app plugin gets the settings of its app block, and {} without one; a resource
// provider no block names is left unconfigured.
func TestPluginSettingsOfAppBlocks(t *testing.T) {
	settings := pluginSettings(&config.Config{Apps: []config.App{{Name: "hello", Settings: json.RawMessage(`{"footer":"Hosted by Example"}`)}}})
	got, ok := settings(sdk.Description{Kind: sdk.KindApp, Name: "hello"})
	require.True(t, ok)
	require.JSONEq(t, `{"footer":"Hosted by Example"}`, string(got))
	got, ok = settings(sdk.Description{Kind: sdk.KindApp, Name: "miniflux"})
	require.True(t, ok, "an app without a block is configured with empty settings")
	require.Empty(t, got)
	_, ok = settings(sdk.Description{Kind: sdk.KindResource, Name: "redis"})
	require.False(t, ok)
}

// A provider whose settings schema has state_address and state_key gets the host's state
// backend (on loopback for an unspecified listen address) and key where its block leaves
// them out; another provider's settings stay as they are.
func TestStateBackendFilledIn(t *testing.T) {
	keys, err := tfstate.LoadOrCreate(t.TempDir())
	require.NoError(t, err)
	settings := withStateBackend(pluginSettings(&config.Config{Resources: []config.Resource{
		{Type: "postgresql", Provider: "terraform", Settings: json.RawMessage(`{"modules":{"postgresql":"/etc/fedhost/tf/pg"}}`)},
		{Type: "redis", Provider: "redis", Settings: json.RawMessage(`{"address":"127.0.0.1:6379"}`)},
	}}), "0.0.0.0:8090", keys)
	schema := json.RawMessage(`{"properties":{"modules":{},"state_address":{},"state_key":{}}}`)
	got, ok := settings(sdk.Description{Kind: sdk.KindResource, Name: "terraform", SettingsSchema: schema})
	require.True(t, ok)
	require.JSONEq(t, `{"modules":{"postgresql":"/etc/fedhost/tf/pg"},"state_address":"http://127.0.0.1:8090/api/v1/terraform/state","state_key":"`+keys.StateKey()+`"}`, string(got))
	got, ok = settings(sdk.Description{Kind: sdk.KindResource, Name: "redis", SettingsSchema: json.RawMessage(`{"properties":{"address":{}}}`)})
	require.True(t, ok)
	require.JSONEq(t, `{"address":"127.0.0.1:6379"}`, string(got))
	require.Equal(t, "[::1]:8090", loopbackOf("[::]:8090"))
	require.Equal(t, "192.0.2.1:8090", loopbackOf("192.0.2.1:8090"))
}
