package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
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
