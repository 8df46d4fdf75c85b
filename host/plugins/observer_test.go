package plugins_test

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/metrics"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// sample is the value of a counter, or a histogram's count, of the series of name
// whose labels include labels; 0 when there is none.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if m.Histogram != nil {
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// The observer sees the start, the restart after a crash, and every call with its method.
func TestObserverCountsStartsRestartsAndCalls(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t, "fedhost-resource-echo")
	lockAll(t, dir)
	mx := metrics.New(nil)
	m, err := plugins.New(plugins.Options{
		Dir: dir, DataDir: t.TempDir(), Observer: mx,
		Settings:       func(sdk.Description) (json.RawMessage, bool) { return json.RawMessage(`{"greeting":"hi"}`), true },
		HealthInterval: 100 * time.Millisecond, ExitPoll: 20 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	require.NoError(t, m.Start(context.Background()))
	echo := map[string]string{"plugin": "echo"}
	require.Equal(t, 1.0, sample(t, mx.Registry, "fedhost_plugin_starts_total", echo))
	require.Equal(t, 0.0, sample(t, mx.Registry, "fedhost_plugin_restarts_total", echo))
	require.Equal(t, 1.0, sample(t, mx.Registry, "fedhost_plugin_call_duration_seconds", map[string]string{"plugin": "echo", "method": "Configure"}))

	p := m.Plugins()[0]
	c, err := p.Client()
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(c.Pid(), syscall.SIGKILL))
	require.Eventually(t, func() bool { return p.Status().State == plugins.StateHealthy && p.Status().Restarts == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 2.0, sample(t, mx.Registry, "fedhost_plugin_starts_total", echo))
	require.Equal(t, 1.0, sample(t, mx.Registry, "fedhost_plugin_restarts_total", echo))

	c, err = p.Client()
	require.NoError(t, err)
	provision := map[string]string{"plugin": "echo", "method": "Provision"}
	before := sample(t, mx.Registry, "fedhost_plugin_call_duration_seconds", provision)
	_, err = c.Resource().Provision(context.Background(), resource.Request{Tenant: "t1", Instance: "a", Type: "echo", Spec: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, before+1, sample(t, mx.Registry, "fedhost_plugin_call_duration_seconds", provision))
}
