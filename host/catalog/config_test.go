package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/app"
)

func TestApplyRenamesMovesValuesAndReportsWhatCannotMove(t *testing.T) {
	t.Parallel()
	c := &Catalog{byName: map[string]*App{
		"miniflux": {Name: "miniflux", Renames: []app.Rename{
			{From: "/pollingInterval", To: "/pollingFrequency", Since: "2.3.0"},
			{From: "/sso", To: "/oidc/enable", Since: "2.3.0"},
			{From: "/adminName", To: "/adminUsername", Since: "2.3.0"},
			{From: "/limits", To: "/logLevel/max", Since: "2.3.0"},
		}},
	}}
	in := `{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{
		"pollingInterval":15,"sso":true,"adminName":"old","adminUsername":"new","logLevel":"info","limits":3}}}}`
	out, unmigrated, err := c.ApplyRenames(json.RawMessage(in), nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{
		"pollingFrequency":15,"oidc":{"enable":true},"adminName":"old","adminUsername":"new","logLevel":"info","limits":3}}}}`, string(out))
	require.ElementsMatch(t, []Unmigrated{
		{App: "miniflux", From: "/adminName", To: "/adminUsername", Reason: "the new option is already set"},
		{App: "miniflux", From: "/limits", To: "/logLevel/max", Reason: "the new option's parent is not an object"},
	}, unmigrated)

	again, unmigrated2, err := c.ApplyRenames(out, nil)
	require.NoError(t, err)
	require.JSONEq(t, string(out), string(again), "renames apply once")
	require.Len(t, unmigrated2, 2, "what could not move is reported again, and stays")
}

// A rename into the value it moves, as when an option that was a string becomes an
// object of which it is one field, moves the value and loses nothing.
func TestApplyRenamesIntoTheMovedValue(t *testing.T) {
	t.Parallel()
	c := &Catalog{byName: map[string]*App{
		"miniflux": {Name: "miniflux", Renames: []app.Rename{
			{From: "/smtp", To: "/smtp/host", Since: "2.4.0"},
			{From: "/oidc", To: "/oidc/provider", Since: "2.4.0"},
		}},
	}}
	in := `{"domain":"x.org","apps":{"miniflux":{"options":{"smtp":"mail.example","oidc":{"enable":true}}}}}`
	out, unmigrated, err := c.ApplyRenames(json.RawMessage(in), nil)
	require.NoError(t, err)
	require.Empty(t, unmigrated)
	require.JSONEq(t, `{"domain":"x.org","apps":{"miniflux":{"options":{
		"smtp":{"host":"mail.example"},"oidc":{"provider":{"enable":true}}}}}}`, string(out))
}

// A rename with Since moves a value only on the way from a version below Since to one at
// or above it: not for a configuration made at Since or later, not into a version still
// below it.
func TestRenameAppliesOnlyAcrossItsSince(t *testing.T) {
	t.Parallel()
	r := app.Rename{From: "/httpClientTimeout", To: "/fetcher/timeout", Since: "2.3.6"}
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"2.3.5", "2.3.6", true}, {"2.3.5", "2.4.0", true}, {"", "2.3.6", true}, {"2.3.6-rc.1", "2.3.6", true},
		{"2.3.6", "2.3.6", false}, {"2.3.6", "2.4.0", false}, {"2.3.4", "2.3.5", false}, {"2.3.5", "2.3.6-rc.1", false},
	} {
		require.Equal(t, c.want, RenameApplies(r, c.from, c.to), "%s to %s", c.from, c.to)
	}
	require.True(t, RenameApplies(app.Rename{From: "/a", To: "/b"}, "2.3.6", "2.3.6"), "a rename without Since always applies")

	cat := &Catalog{byName: map[string]*App{"miniflux": {Name: "miniflux", Version: "2.3.6", Renames: []app.Rename{r}}}}
	in := `{"domain":"x.org","apps":{"miniflux":{"options":{"httpClientTimeout":45}}}}`
	moved := `{"domain":"x.org","apps":{"miniflux":{"options":{"fetcher":{"timeout":45}}}}}`
	out, _, err := cat.ApplyRenames(json.RawMessage(in), map[string]string{"miniflux": "2.3.5"})
	require.NoError(t, err)
	require.JSONEq(t, moved, string(out))
	out, _, err = cat.ApplyRenames(json.RawMessage(in), map[string]string{"miniflux": "2.3.6"})
	require.NoError(t, err)
	require.JSONEq(t, in, string(out), "made at 2.3.6: nothing to move")
	out, _, err = cat.ApplyRenames(json.RawMessage(in), nil)
	require.NoError(t, err)
	require.JSONEq(t, moved, string(out), "of no known version: moved")
}

// A stored secret is kept outside the configuration, by pointer: a rename moves its
// reference as it moves the option it stood for, at From or under it, only across the
// rename's Since, and never onto a reference that is there already.
func TestRenameSecretsMovesTheReferences(t *testing.T) {
	t.Parallel()
	c := &Catalog{byName: map[string]*App{
		"miniflux": {Name: "miniflux", Version: "2.4.0", Renames: []app.Rename{
			{From: "/adminPassword", To: "/admin/password", Since: "2.4.0"},
			{From: "/smtp", To: "/mail", Since: "2.4.0"},
			{From: "/oidc", To: "/oidc/provider", Since: "2.4.0"},
			{From: "/apiKey", To: "/api/key", Since: "2.4.0"},
			{From: "/old", To: "/new", Since: "2.5.0"},
		}},
	}}
	refs := map[string]string{
		"/apps/miniflux/options/adminPassword":     "ref-admin",
		"/apps/miniflux/options/smtp/password":     "ref-smtp",
		"/apps/miniflux/options/oidc/clientSecret": "ref-oidc",
		"/apps/miniflux/options/apiKey":            "ref-old-key",
		"/apps/miniflux/options/api/key":           "ref-new-key",
		"/apps/miniflux/options/old":               "ref-later",
		"/apps/miniflux/options/adminPasswordHash": "ref-hash",
		"/apps/other/options/adminPassword":        "ref-other",
		"/import":                                  "ref-import",
	}
	before := map[string]string{}
	for k, v := range refs {
		before[k] = v
	}
	out := c.RenameSecrets(refs, map[string]string{"miniflux": "2.3.6"})
	require.Equal(t, map[string]string{
		"/apps/miniflux/options/admin/password":             "ref-admin",
		"/apps/miniflux/options/mail/password":              "ref-smtp",
		"/apps/miniflux/options/oidc/provider/clientSecret": "ref-oidc",
		"/apps/miniflux/options/apiKey":                     "ref-old-key", // its new pointer is taken
		"/apps/miniflux/options/api/key":                    "ref-new-key",
		"/apps/miniflux/options/old":                        "ref-later", // 2.4.0 is before its Since
		"/apps/miniflux/options/adminPasswordHash":          "ref-hash",  // not under /adminPassword
		"/apps/other/options/adminPassword":                 "ref-other",
		"/import":                                           "ref-import",
	}, out)
	require.Equal(t, before, refs, "the references given are not changed")

	// A configuration made at 2.4.0 already has the new names: nothing moves.
	require.Equal(t, before, c.RenameSecrets(refs, map[string]string{"miniflux": "2.4.0"}))
	require.Empty(t, c.RenameSecrets(nil, nil))
}
