package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
)

// Settings are checked at Configure, through the host's schema check and the
// provider's own: each refusal names the setting.
func TestSettingsAreChecked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.Start(ctx, binary, client.WithEnv(sdk.DataDirEnv+"="+t.TempDir()))
	require.NoError(t, err)
	defer p.Kill()
	state := `"state_address":"http://127.0.0.1:1/api/v1/terraform/state","state_key":"` + strings.Repeat("k", 64) + `"`
	dir := moduleDir("postgresql")
	require.NoError(t, p.Configure(ctx, json.RawMessage(`{"modules":{"postgresql":"`+dir+`"},`+state+`}`)), "a module as its directory")
	require.NoError(t, p.Configure(ctx, json.RawMessage(`{}`)), "no module: the provider answers nothing")
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(p.Resource().Validate(ctx, "postgresql", json.RawMessage(`{}`))))

	for _, c := range []struct{ settings, field string }{
		{`{"modules":{"instance":"` + dir + `"},` + state + `}`, "settings/modules"},
		{`{"modules":{"postgresql":"testdata/postgresql"},` + state + `}`, "settings/modules/postgresql"},
		{`{"modules":{"postgresql":"` + dir + `/main.tf"},` + state + `}`, "settings/modules/postgresql"},
		{`{"modules":{"postgresql":{"dir":"` + dir + `","variables":{"tenant":"x"}}},` + state + `}`, "settings/modules/postgresql/variables"},
		{`{"modules":{"postgresql":"` + dir + `"}}`, "settings/state_address"},
		{`{"modules":{"postgresql":"` + dir + `"},` + state + `,"stale_lock_after":"soon"}`, "settings/stale_lock_after"},
		{`{"modules":{"postgresql":"` + dir + `"},` + state + `,"terraform":"/nonexistent/terraform"}`, "settings/terraform"},
	} {
		err := p.Configure(ctx, json.RawMessage(c.settings))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%s: %v", c.settings, err)
		require.True(t, strings.HasPrefix(sdk.FieldOf(err), c.field), "%s names %q, want %q: %v", c.settings, sdk.FieldOf(err), c.field, err)
	}
}
