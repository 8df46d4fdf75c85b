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
	out, unmigrated, err := c.ApplyRenames(json.RawMessage(in))
	require.NoError(t, err)
	require.JSONEq(t, `{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{
		"pollingFrequency":15,"oidc":{"enable":true},"adminName":"old","adminUsername":"new","logLevel":"info","limits":3}}}}`, string(out))
	require.ElementsMatch(t, []Unmigrated{
		{App: "miniflux", From: "/adminName", To: "/adminUsername", Reason: "the new option is already set"},
		{App: "miniflux", From: "/limits", To: "/logLevel/max", Reason: "the new option's parent is not an object"},
	}, unmigrated)

	again, unmigrated2, err := c.ApplyRenames(out)
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
	out, unmigrated, err := c.ApplyRenames(json.RawMessage(in))
	require.NoError(t, err)
	require.Empty(t, unmigrated)
	require.JSONEq(t, `{"domain":"x.org","apps":{"miniflux":{"options":{
		"smtp":{"host":"mail.example"},"oidc":{"provider":{"enable":true}}}}}}`, string(out))
}
