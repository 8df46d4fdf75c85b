package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkFrontDoor is the front door's cost: each iteration sends the same GET
// directly to the upstream, through Caddy on plain HTTP and through Caddy on HTTPS
// (HTTP/2), one after the other on kept-alive connections, and reports the p50 and p99
// latency of each and the ratios of the p50s.
//
//	go test -run '^$' -bench FrontDoor -benchtime 3000x ./plugins/resources/caddy/
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
