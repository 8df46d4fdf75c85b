package sdk_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		s              string
		tenant, instnc bool
	}{
		{"a", true, true},
		{"acme-1", true, true},
		{"a234567890123456789012345678901b", true, true},   // 32
		{"a2345678901234567890123456789012b", false, true}, // 33
		{"", false, false},
		{"1abc", false, false},
		{"abc-", false, false},
		{"Abc", false, false},
		{"a_b", false, false},
		{"a.b", false, false},
	}
	for _, c := range cases {
		require.Equal(t, c.tenant, sdk.ValidTenant(c.s), "tenant %q", c.s)
		require.Equal(t, c.instnc, sdk.ValidInstance(c.s), "instance %q", c.s)
	}
}

func TestDescriptionValidate(t *testing.T) {
	t.Parallel()
	good := sdk.Description{Kind: sdk.KindApp, Protocol: 1, Name: "miniflux", Version: "2.3.5", Serves: []string{"miniflux"}}
	require.NoError(t, good.Validate())
	for _, v := range []string{"1.0.0-rc.1", "1.0.0+build.5", "10.20.30"} {
		d := good
		d.Version = v
		require.NoError(t, d.Validate(), v)
	}
	cases := map[string]func(*sdk.Description){
		"kind":            func(d *sdk.Description) { d.Kind = "database" },
		"name":            func(d *sdk.Description) { d.Name = "Mini Flux" },
		"version":         func(d *sdk.Description) { d.Version = "v2" },
		"protocol":        func(d *sdk.Description) { d.Protocol = 0 },
		"serves":          func(d *sdk.Description) { d.Serves = nil },
		"settings_schema": func(d *sdk.Description) { d.SettingsSchema = []byte("{") },
	}
	for field, mutate := range cases {
		d := good
		mutate(&d)
		err := d.Validate()
		require.Equal(t, field, sdk.FieldOf(err), "%v", err)
	}
	for _, v := range []string{"1.0", "1.0.0-", "1.0.x", "1..0", ""} {
		d := good
		d.Version = v
		require.Equal(t, "version", sdk.FieldOf(d.Validate()), v)
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("provisioning: %w", sdk.Invalid("request/buckets", "too long"))
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "request/buckets", sdk.FieldOf(err))
	require.True(t, errors.Is(err, &sdk.Error{Code: sdk.CodeInvalid}))
	require.False(t, errors.Is(err, &sdk.Error{Code: sdk.CodeConflict}))
	require.Equal(t, sdk.CodeInternal, sdk.CodeOf(errors.New("boom")))
	require.Equal(t, sdk.Code(""), sdk.CodeOf(nil))
}
