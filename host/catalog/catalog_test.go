package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A deployment pinned to an older revision is validated against the schemas of the
// versions it runs, not the newest.
func TestAtValidatesWithTheVersionsOfARevision(t *testing.T) {
	t.Parallel()
	old := &App{Name: "miniflux", Version: "2.3.5", Summary: "Miniflux 2.3.5",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"pollingFrequency":{"type":"integer"}}}`)}
	newer := &App{Name: "miniflux", Version: "2.4.0", Summary: "Miniflux 2.4.0",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"pollingFrequency":{"type":"integer"},"webhooks":{"type":"boolean"}}}`)}
	other := &App{Name: "peertube", Version: "7.0.0", Summary: "PeerTube",
		Schema: json.RawMessage(`{"type":"object"}`)}
	c := &Catalog{apps: []*App{newer, other}, byName: map[string]*App{"miniflux": newer, "peertube": other},
		versions: map[string]map[string]*App{"miniflux": {"2.3.5": old, "2.4.0": newer}, "peertube": {"7.0.0": other}}}
	require.NoError(t, c.compose())

	withWebhooks := json.RawMessage(`{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{"webhooks":true}}}}`)
	require.NoError(t, c.Validate(withWebhooks), "the newest version knows the option")

	pinned, err := c.At(map[string]string{"miniflux": "2.3.5"})
	require.NoError(t, err)
	err = pinned.Validate(withWebhooks)
	require.Error(t, err, "2.3.5 does not know it")
	require.Contains(t, err.Error(), "webhooks")
	require.NoError(t, pinned.Validate(json.RawMessage(`{"domain":"x.org","apps":{"peertube":{"enable":true}}}`)),
		"an app the revision does not name is at its newest")
	a, ok := pinned.App("miniflux")
	require.True(t, ok)
	require.Equal(t, "2.3.5", a.Version)

	again, err := c.At(map[string]string{"miniflux": "2.3.5"})
	require.NoError(t, err)
	require.Same(t, pinned, again, "views are made once")

	_, err = c.At(map[string]string{"miniflux": "2.2.0"})
	require.ErrorContains(t, err, "install fedhost-app-miniflux_2.2.0, or apply updates")
}
