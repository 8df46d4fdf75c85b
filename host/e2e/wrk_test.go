package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wrkDeployments is how many deployments the lists hold while wrk reads them.
const wrkDeployments = 1000

// BenchmarkWrk loads the deployments list of the API and of the UI with wrk (2 threads,
// 32 connections, 10 s each, 30 s timeout) on a host holding 1,000 deployments, read by the superuser
// (who sees them all), then GET /api/v1/me as the floor of an authenticated request. It
// reports each one's requests per second and 99th percentile latency; one iteration is
// the whole measurement, so run it with -benchtime 1x.
func BenchmarkWrk(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Fatalf("no wrk on PATH (%v): install the Debian package: apt-get install wrk", err)
	}
	h := startHost(b)
	for i := 0; i < wrkDeployments; i++ {
		h.create(fmt.Sprintf("wrk-%04d", i))
	}
	// The figures depend on how many rows one answer holds (the whole list, or a page
	// of it), so the benchmark reports that too.
	var listed []deployment
	require.Equal(b, http.StatusOK, h.call("GET", "/deployments", nil, &listed))
	require.NotEmpty(b, listed)
	cookie := sessionCookie(b, h)
	page := get(b, "http://"+h.addr+"/deployments", "Cookie: "+cookie)
	require.Contains(b, page, fmt.Sprintf("wrk-%04d", wrkDeployments-1), "the deployments page lists the newest deployment")
	pageRows := strings.Count(page, `<a href="/deployments/`) - strings.Count(page, `<a href="/deployments/new"`)

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		api := runWrk(b, wrk, "http://"+h.addr+"/api/v1/deployments", "Authorization: Bearer "+h.token)
		ui := runWrk(b, wrk, "http://"+h.addr+"/deployments", "Cookie: "+cookie)
		// The floor: the same token check and no list, to tell the cost of the list
		// from the cost of a request.
		me := runWrk(b, wrk, "http://"+h.addr+"/api/v1/me", "Authorization: Bearer "+h.token)
		b.ReportMetric(api.rps, "api-req/s")
		b.ReportMetric(ms(api.p99), "api-p99-ms")
		b.ReportMetric(ui.rps, "page-req/s")
		b.ReportMetric(ms(ui.p99), "page-p99-ms")
		b.ReportMetric(me.rps, "me-req/s")
		b.ReportMetric(ms(me.p99), "me-p99-ms")
		b.ReportMetric(float64(len(listed)), "api-rows")
		b.ReportMetric(float64(pageRows), "page-rows")
	}
}

// sessionCookie signs the superuser in through the API and returns the session cookie
// as a Cookie header's value.
func sessionCookie(b *testing.B, h *host) string {
	m := firstPassword.FindStringSubmatch(h.log.String())
	require.NotNil(b, m, "the first start printed no password:\n%s", h.log)
	body, err := json.Marshal(map[string]string{"name": "admin", "password": m[1]})
	require.NoError(b, err)
	resp, err := http.Post("http://"+h.addr+"/api/v1/login", "application/json", bytes.NewReader(body))
	require.NoError(b, err)
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode)
	var login struct {
		CSRF string `json:"csrf_token"`
	}
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&login))
	for _, c := range resp.Cookies() {
		if c.Name == "fedhost_session" {
			// The first start's password is changed before the session may do anything else.
			change, err := json.Marshal(map[string]string{"current_password": m[1], "new_password": "the wrk benchmark's passphrase"})
			require.NoError(b, err)
			req, err := http.NewRequest("PUT", "http://"+h.addr+"/api/v1/me/password", bytes.NewReader(change))
			require.NoError(b, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-CSRF-Token", login.CSRF)
			req.AddCookie(c)
			changed, err := http.DefaultClient.Do(req)
			require.NoError(b, err)
			changed.Body.Close()
			require.Equal(b, http.StatusNoContent, changed.StatusCode)
			return c.Name + "=" + c.Value
		}
	}
	b.Fatalf("the login set no fedhost_session cookie: %v", resp.Cookies())
	return ""
}

func get(b *testing.B, url, header string) string {
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(b, err)
	name, value, _ := strings.Cut(header, ": ")
	req.Header.Set(name, value)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, resp.StatusCode, "GET %s: %s", url, raw)
	return string(raw)
}

type wrkResult struct {
	rps float64
	p99 time.Duration
}

var (
	wrkRate   = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkP99    = regexp.MustCompile(`\s99%\s+([0-9.]+(?:us|ms|s|m|h))`)
	wrkErrors = regexp.MustCompile(`Non-2xx or 3xx responses|Socket errors`)
)

// runWrk loads url for 10 s and reads wrk's figures; an error response, a socket error or
// a timeout fails the benchmark, since its figures would not be those of the page.
func runWrk(b *testing.B, wrk, url, header string) wrkResult {
	return runWrkConns(b, wrk, url, header, 32)
}

// runWrkConns is runWrk with conns connections (two threads, one for a single
// connection).
func runWrkConns(b *testing.B, wrk, url, header string, conns int) wrkResult {
	threads := min(2, conns)
	// wrk leaves requests slower than its 2 s default timeout out of the latency figures;
	// 30 s keeps them in.
	cmd := exec.Command(wrk, "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns), "-d10s", "--timeout", "30s", "--latency", "-H", header, url)
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "wrk: %s", out)
	b.Logf("wrk %s:\n%s", url, out)
	require.False(b, wrkErrors.Match(out), "wrk saw errors on %s:\n%s", url, out)
	rate, p99 := wrkRate.FindSubmatch(out), wrkP99.FindSubmatch(out)
	require.True(b, rate != nil && p99 != nil, "wrk's output has no Requests/sec or 99%% line:\n%s", out)
	rps, err := strconv.ParseFloat(string(rate[1]), 64)
	require.NoError(b, err)
	d, err := time.ParseDuration(string(p99[1]))
	require.NoError(b, err)
	return wrkResult{rps: rps, p99: d}
}
