package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestSettingsRefused(t *testing.T) {
	t.Parallel()
	uf, pf := writeCredentials(t, user, password)
	empty := t.TempDir() + "/empty"
	writeFile(t, empty, "")
	for field, raw := range map[string]string{
		"settings/base_url":      `{"base_url":"ftp://api.example/","username_file":"` + uf + `","password_file":"` + pf + `"}`,
		"settings/password_file": `{"username_file":"` + uf + `","password_file":"` + empty + `"}`,
		"settings/username_file": `{"username_file":"/nonexistent/user","password_file":"` + pf + `"}`,
		"settings":               `{"username_file":"` + uf + `","password_file":"` + pf + `","password":"x"}`,
	} {
		err := (&driver{}).Configure(context.Background(), json.RawMessage(raw))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), field)
		require.Equal(t, field, sdk.FieldOf(err), "%v", err)
	}
	_, err := (&driver{}).Check(context.Background(), "acme.test")
	require.Equal(t, sdk.CodeUnavailable, sdk.CodeOf(err), "a driver not configured yet")
}
