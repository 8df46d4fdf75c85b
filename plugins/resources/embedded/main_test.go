package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/plugins/resources/internal/secretfile/secrettest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// binary is the plugin built once for the whole package.
var binary string

func TestMain(m *testing.M) { plugintest.Main(m, "fedhost-resource-embedded", &binary) }

func dirSettings(tb testing.TB) json.RawMessage {
	raw, err := json.Marshal(settings{Dir: tb.TempDir()})
	require.NoError(tb, err)
	return raw
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	raw, err := json.Marshal(settings{Dir: dir})
	require.NoError(t, err)
	conformance.Resource(t, binary, secrettest.Case(t, binary, raw))
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{keyFileName}, names, "the kit leaves only the key in the store after a run")
}

func TestConfigureWithoutDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.Start(ctx, binary, client.WithEnv(sdk.DataDirEnv+"="))
	require.NoError(t, err)
	defer p.Kill()
	err = p.Configure(ctx, json.RawMessage(`{}`))
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "settings/dir", sdk.FieldOf(err))
}

// BenchmarkProvision provisions a new instance of six files per iteration, through the plugin.
func BenchmarkProvision(b *testing.B) {
	rc := secrettest.Start(b, binary, dirSettings(b))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		_, err := rc.Provision(ctx, resource.Request{Tenant: "bench", Instance: fmt.Sprintf("i%d", i), Type: contract.Secret, Spec: json.RawMessage(secrettest.Request), Secrets: secrettest.Supplied()})
		require.NoError(b, err)
	}
}

// BenchmarkDeprovision removes an instance of six files per iteration, through the plugin.
func BenchmarkDeprovision(b *testing.B) {
	rc := secrettest.Start(b, binary, dirSettings(b))
	ctx := context.Background()
	spec := json.RawMessage(secrettest.Request)
	for i := 0; b.Loop(); i++ {
		inst := fmt.Sprintf("i%d", i)
		b.StopTimer()
		_, err := rc.Provision(ctx, resource.Request{Tenant: "bench", Instance: inst, Type: contract.Secret, Spec: spec, Secrets: secrettest.Supplied()})
		require.NoError(b, err)
		b.StartTimer()
		require.NoError(b, rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "bench", Instance: inst, Type: contract.Secret, Spec: spec}))
	}
}
