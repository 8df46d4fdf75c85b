package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
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

// BenchmarkFrontDoorDeploy measures, side by side in one run, what the front door adds to
// a Miniflux deployment: a host without it (the node's loopback address only) and one
// with a zone on a real BIND, a certificate from a real pebble through DNS-01 (its
// validation delays off) and a route on a real Caddy. Each iteration makes a new
// deployment on each host, times its first build (submit to succeeded) and a submit that
// changes nothing.
func BenchmarkFrontDoorDeploy(b *testing.B) {
	plain := startHost(b, "FEDHOST_CONFIG="+plainConfig(b))
	f := startFrontDoor(b)
	var firstPlain, firstDoor, againPlain, againDoor []time.Duration
	timed := func(h *host, id string, cfg map[string]any) time.Duration {
		start := time.Now()
		bu := h.wait(h.submit(id, cfg).ID)
		require.Equal(b, "succeeded", bu.State, "%+v", bu.Events)
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("bench%d", i)
		cfg := minifluxConfig(ns+".test", nil)
		dp, dd := plain.create(ns), f.h.create(ns)
		firstPlain = append(firstPlain, timed(plain, dp.ID, cfg))
		firstDoor = append(firstDoor, timed(f.h, dd.ID, cfg))
		againPlain = append(againPlain, timed(plain, dp.ID, cfg))
		againDoor = append(againDoor, timed(f.h, dd.ID, cfg))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(firstPlain)), "first-plain-ms")
	b.ReportMetric(ms(median(firstDoor)), "first-frontdoor-ms")
	b.ReportMetric(ms(median(firstDoor)-median(firstPlain)), "first-added-ms")
	b.ReportMetric(ms(median(againPlain)), "again-plain-ms")
	b.ReportMetric(ms(median(againDoor)), "again-frontdoor-ms")
	b.ReportMetric(ms(median(againDoor)-median(againPlain)), "again-added-ms")
}

// plainConfig is the embedded default's resources without a front door.
func plainConfig(tb testing.TB) string {
	path := filepath.Join(tb.TempDir(), "fedhost.hcl")
	require.NoError(tb, os.WriteFile(path, []byte(`
resource "postgresql" {
  provider = "postgresql"
  settings = { managed = true }
}
resource "s3" {
  provider = "versitygw"
  settings = { managed = true }
}
resource "secret" { provider = "embedded" }
resource "instance" {
  provider = "local"
  limits   = { per_deployment = 8 }
}
`), 0o600))
	return path
}

// BenchmarkFrontDoorSignInPage measures the front door's cost on Miniflux's sign-in page
// of the embedded default (localca, Caddy): the same GET through Caddy over HTTPS/2 and
// straight to the node over HTTP/1.1, one client at a time and 8 at a time, in
// alternating rounds so that both see the same machine. It reports each one's median
// latency and their ratio. wrk cannot be used: it sends no SNI for a name other than the one it connects
// to, and Caddy serves a certificate only for the SNI of a route.
func BenchmarkFrontDoorSignInPage(b *testing.B) {
	h := startHost(b)
	d := h.create("acme")
	require.Equal(b, "succeeded", h.wait(h.submit(d.ID, minifluxConfig("acme.localhost", nil)).ID).State)
	direct := "http://" + h.deployment(d.ID).Nodes["miniflux-web"]["http"] + "/"
	front := fmt.Sprintf("https://feeds.acme.localhost:%d/", h.httpsPort)
	rootPEM, err := os.ReadFile(filepath.Join(h.dataDir, "plugins", "localca", "ca.pem"))
	require.NoError(b, err)
	pool := x509.NewCertPool()
	require.True(b, pool.AppendCertsFromPEM(rootPEM))
	addr := "127.0.0.1:" + strconv.Itoa(h.httpsPort)
	frontClient := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	directClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	fetch := func(c *http.Client, url string) time.Duration {
		start := time.Now()
		resp, err := c.Get(url)
		require.NoError(b, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		require.Contains(b, string(body), "<title>Sign In - Miniflux</title>")
		return time.Since(start)
	}
	round := func(c *http.Client, url string, n, workers int) []time.Duration {
		out := make([]time.Duration, n)
		var wg sync.WaitGroup
		next := make(chan int, n)
		for i := 0; i < n; i++ {
			next <- i
		}
		close(next)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					out[i] = fetch(c, url)
				}
			}()
		}
		wg.Wait()
		return out
	}
	round(frontClient, front, 50, 8) // warm both up: connections, Miniflux's caches
	round(directClient, direct, 50, 8)
	var front1, direct1, front8, direct8 []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		front1 = append(front1, round(frontClient, front, 100, 1)...)
		direct1 = append(direct1, round(directClient, direct, 100, 1)...)
		front8 = append(front8, round(frontClient, front, 200, 8)...)
		direct8 = append(direct8, round(directClient, direct, 200, 8)...)
	}
	b.StopTimer()
	for _, r := range []struct {
		name          string
		front, direct []time.Duration
	}{{"c1", front1, direct1}, {"c8", front8, direct8}} {
		f, dr := median(r.front), median(r.direct)
		b.ReportMetric(ms(f), r.name+"-frontdoor-p50-ms")
		b.ReportMetric(ms(dr), r.name+"-direct-p50-ms")
		b.ReportMetric(float64(f)/float64(dr), r.name+"-ratio")
	}
}
