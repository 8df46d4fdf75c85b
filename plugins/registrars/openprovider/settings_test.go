package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/plugins/registrars/openprovider/internal/optest"
	"github.com/fedhost/fedhost/sdk"
)

func TestSettingsRefused(t *testing.T) {
	t.Parallel()
	uf, pf := writeCredentials(t, user, password)
	for field, raw := range map[string]string{
		"settings/base_url":      `{"base_url":"https://user:pw@api.example/v1beta/","username_file":"` + uf + `","password_file":"` + pf + `"}`,
		"settings/password_file": `{"username_file":"` + uf + `","password_file":"/nonexistent/pw"}`,
		"settings/username_file": `{"username_file":"","password_file":"` + pf + `"}`,
		"settings":               `{"username_file":"` + uf + `","password_file":"` + pf + `","api_key":"x"}`,
	} {
		err := (&driver{}).Configure(context.Background(), json.RawMessage(raw))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), field)
		require.Equal(t, field, sdk.FieldOf(err), "%v", err)
		require.NotContains(t, err.Error(), "pw@")
	}
}

// A token older than token_minutes is replaced before it is used, without a 401 first.
func TestTokenAge(t *testing.T) {
	t.Parallel()
	srv := optest.Start(user, password)
	t.Cleanup(srv.Close)
	d := &driver{}
	require.NoError(t, d.Configure(context.Background(), settingsFor(t, srv, nil)))
	ctx := context.Background()
	_, err := d.Snapshot(ctx)
	require.NoError(t, err)
	d.cfg.tokenTTL = 50 * time.Millisecond
	time.Sleep(60 * time.Millisecond)
	_, err = d.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, srv.Count("POST /v1beta/auth/login"))
	require.Equal(t, 2, srv.Count("GET /v1beta/domains"), "no call was refused for its token")
}
