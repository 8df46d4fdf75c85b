package e2e

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkSubmitToHealthy measures a Miniflux submit that changes an option (so the node
// restarts) from the API call to the healthy verdict, split from the build's events into
// app start (the node's provision: start until its first passing health check), provider
// time (the other resources' provisions, here idempotent checks) and engine time (the
// rest: API, validation, queue, plan with its checks, render, bookkeeping).
func BenchmarkSubmitToHealthy(b *testing.B) {
	h := startHost(b)
	d := h.create("bench")
	first := h.submit(d.ID, minifluxConfig("bench.example.org", nil))
	require.Equal(b, "succeeded", h.wait(first.ID).State)

	var totals, engines, apps, providers []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var bu build
		code := h.call("POST", "/deployments/"+d.ID+"/submit", minifluxConfig("bench.example.org", map[string]any{"pollingFrequency": 10 + i%1000}), &bu)
		require.Equal(b, http.StatusAccepted, code)
		done := h.wait(bu.ID)
		require.Equal(b, "succeeded", done.State)
		var healthy, nodeStart time.Time
		var resources time.Duration
		for j, e := range done.Events {
			switch {
			case strings.HasPrefix(e.Message, "node ") && strings.Contains(e.Message, "is healthy"):
				healthy = e.Time
			case strings.Contains(e.Message, "(instance by "):
				nodeStart = e.Time
			case strings.Contains(e.Message, " by ") && j+1 < len(done.Events):
				resources += done.Events[j+1].Time.Sub(e.Time)
			}
		}
		require.False(b, healthy.IsZero() || nodeStart.IsZero(), "events: %+v", done.Events)
		total := healthy.Sub(start)
		app := healthy.Sub(nodeStart)
		totals, apps, providers = append(totals, total), append(apps, app), append(providers, resources)
		engines = append(engines, total-app-resources)
	}
	b.StopTimer()
	b.ReportMetric(ms(median(totals)), "total-ms")
	b.ReportMetric(ms(median(engines)), "engine-ms")
	b.ReportMetric(ms(median(providers)), "providers-ms")
	b.ReportMetric(ms(median(apps)), "appstart-ms")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
