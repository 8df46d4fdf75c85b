package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkFrontDoor is the front door's cost: each iteration sends the same GET
// directly to the upstream, through Caddy on plain HTTP and through Caddy on HTTPS
// (HTTP/2), one after the other on kept-alive connections, and reports the p50 and p99
// latency of each and the ratios of the p50s.
//
//	go test -run '^$' -bench 'FrontDoor$' -benchtime 3000x ./plugins/resources/caddy/
func BenchmarkFrontDoor(b *testing.B) {
	f := newFrontDoor(b)
	ca := newCA(b)
	body := make([]byte, 1024)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	}))
	b.Cleanup(up.Close)
	if _, err := f.provision(b, "bench", "tls", routeSpec(b, []string{"tls.bench.test"}, up.Listener.Addr().String(), ca.issue(b, "tls.bench.test")), ca.keyPEM); err != nil {
		b.Fatal(err)
	}
	if _, err := f.provision(b, "bench", "plain", routeSpec(b, []string{"plain.bench.test"}, up.Listener.Addr().String(), ""), nil); err != nil {
		b.Fatal(err)
	}
	targets := []struct {
		name string
		url  string
		c    *http.Client
	}{
		{"direct", up.URL + "/item", &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}},
		{"caddy-http", f.httpURL("plain.bench.test", "/item"), f.client(nil)},
		{"caddy-https-h2", f.httpsURL("tls.bench.test", "/item"), f.client(ca)},
	}
	once := func(i int) time.Duration {
		t := targets[i]
		start := time.Now()
		resp, err := t.c.Get(t.url)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK || len(got) != len(body) {
			b.Fatalf("%s: status %d, %d bytes, %v", t.name, resp.StatusCode, len(got), err)
		}
		return d
	}
	for range 50 { // connections up, TLS handshakes done
		for i := range targets {
			once(i)
		}
	}
	lat := make([][]time.Duration, len(targets))
	b.ResetTimer()
	for b.Loop() {
		for i := range targets {
			lat[i] = append(lat[i], once(i))
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(targets))
	for i, t := range targets {
		slices.Sort(lat[i])
		p50[i] = float64(lat[i][len(lat[i])/2].Microseconds())
		b.ReportMetric(p50[i], "p50-"+t.name+"-µs")
		b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Microseconds()), "p99-"+t.name+"-µs")
	}
	b.ReportMetric(p50[1]/p50[0], "p50-caddy-http/direct")
	b.ReportMetric(p50[2]/p50[0], "p50-caddy-https/direct")
}

// BenchmarkRouteChange is how long adding a TLS route to a running Caddy and removing it
// again take, through the admin API (each a handful of changes by @id).
//
//	go test -run '^$' -bench RouteChange -benchtime 20x ./plugins/resources/caddy/
func BenchmarkRouteChange(b *testing.B) {
	f := newFrontDoor(b)
	ca := newCA(b)
	up := upstream(b, "bench")
	for i := 0; b.Loop(); i++ {
		host := fmt.Sprintf("r%d.bench.test", i)
		spec := routeSpec(b, []string{host}, up.Listener.Addr().String(), ca.issue(b, host))
		if _, err := f.provision(b, "bench", "change", spec, ca.keyPEM); err != nil {
			b.Fatal(err)
		}
		f.deprovision(b, "bench", "change")
	}
}

// BenchmarkFrontDoorWrk is the front door under load: wrk (Debian's package; skipped
// when it is not in PATH) for 5 s with 2 threads and 32 connections against the upstream
// directly, through Caddy on HTTP and through Caddy on HTTPS (HTTP/1.1, wrk has no h2),
// one after the other, reporting requests per second and wrk's p50 latency.
//
//	go test -run '^$' -bench FrontDoorWrk -benchtime 1x ./plugins/resources/caddy/
func BenchmarkFrontDoorWrk(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("wrk is not installed (apt-get install wrk)")
	}
	f := newFrontDoor(b)
	ca := newCA(b)
	body := make([]byte, 1024)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(body)
	}))
	b.Cleanup(up.Close)
	// localhost: the one name wrk resolves to the front door's loopback address and sends
	// as SNI, as strict SNI wants the Host to be.
	if _, err := f.provision(b, "bench", "tls", routeSpec(b, []string{"localhost"}, up.Listener.Addr().String(), ca.issue(b, "localhost")), ca.keyPEM); err != nil {
		b.Fatal(err)
	}
	if _, err := f.provision(b, "bench", "plain", routeSpec(b, []string{"plain.bench.test"}, up.Listener.Addr().String(), ""), nil); err != nil {
		b.Fatal(err)
	}
	targets := []struct{ name, url, host string }{
		{"direct", up.URL + "/item", ""},
		{"caddy-http", fmt.Sprintf("http://127.0.0.1:%d/item", f.httpPort), "plain.bench.test"},
		{"caddy-https-h1", fmt.Sprintf("https://localhost:%d/item", f.httpsPort), ""},
	}
	rps := make([]float64, len(targets))
	for b.Loop() {
		for i, t := range targets {
			args := []string{"-t2", "-c32", "-d5s", "--latency", t.url}
			if t.host != "" {
				args = append(args, "-H", "Host: "+t.host)
			}
			out, err := exec.Command(wrk, args...).CombinedOutput()
			if err != nil {
				b.Fatalf("wrk %s: %v\n%s", t.name, err, out)
			}
			r, p50, non2xx := parseWrk(string(out))
			if r == 0 || non2xx {
				b.Fatalf("wrk %s: no requests/sec, or answers that are not 2xx:\n%s", t.name, out)
			}
			rps[i] = r
			b.ReportMetric(r, "req/s-"+t.name)
			b.ReportMetric(p50, "p50-"+t.name+"-µs")
		}
	}
	b.ReportMetric(rps[1]/rps[0], "req/s-caddy-http/direct")
	b.ReportMetric(rps[2]/rps[0], "req/s-caddy-https/direct")
}

// parseWrk reads wrk's requests per second, its p50 latency in µs and whether it saw
// answers that are not 2xx or 3xx.
func parseWrk(out string) (rps, p50 float64, non2xx bool) {
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 2 && fields[0] == "Requests/sec:":
			rps, _ = strconv.ParseFloat(fields[1], 64)
		case len(fields) == 2 && fields[0] == "50%":
			p50 = wrkDuration(fields[1])
		case strings.Contains(line, "Non-2xx or 3xx responses"):
			non2xx = true
		}
	}
	return rps, p50, non2xx
}

// wrkDuration is one of wrk's durations (812.00us, 1.20ms, 2.00s) in µs.
func wrkDuration(s string) float64 {
	for _, u := range []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"ms", 1e3}, {"s", 1e6}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0
			}
			return f * u.us
		}
	}
	return 0
}
