package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/metrics"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// metricsBundle is the API with metrics on, an engine whose builds a started queue runs,
// and the base URL of a real loopback listener.
type metricsBundle struct {
	*bundle
	mx  *metrics.Metrics
	url string
}

func setupMetrics(t *testing.T, token string) *metricsBundle {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	mx := metrics.New(nil)
	m, err := plugins.New(plugins.Options{Dir: t.TempDir(), DataDir: t.TempDir(), Observer: mx})
	require.NoError(t, err)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail})
	engine := deploy.New(deploy.Options{Store: st, Plugins: m, Catalog: cat})
	mx.ReadFrom(st, engine)
	q, err := queue.New(st, queue.Config{Builder: engine, Finished: mx.BuildFinished, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	engine.SetQueue(q)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })

	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail, Version: "1.2.3", Metrics: mx, MetricsToken: token})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return &metricsBundle{bundle: &bundle{app: app, st: st, accounts: accounts, trail: trail}, mx: mx, url: "http://" + ln.Addr().String()}
}

// scrape reads GET /metrics over the loopback listener and parses the text exposition.
func (b *metricsBundle) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(b.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	require.NoError(t, err)
	return families
}

// value is the value of the series of family name with labels, 0 when absent; a
// histogram's is its count.
func value(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
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
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// A request counts under its route pattern and status, not its path; a build counts
// by operation and result once the queue ran it; the queue depth reads the store.
func TestMetricsMoveWithRequestsAndBuilds(t *testing.T) {
	t.Parallel()
	b := setupMetrics(t, "")
	alice := b.user(t, "alice", false)
	route := map[string]string{"route": "/api/v1/deployments/:id", "status": "200"}
	before := value(b.scrape(t), "fedhost_http_requests_total", route)

	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	for range 3 {
		status, _ = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID, "")
		require.Equal(t, http.StatusOK, status)
	}
	status, _ = b.do(t, alice, "GET", "/api/v1/deployments/nope", "")
	require.Equal(t, http.StatusNotFound, status)
	// A path no route takes counts under the pattern that answered it: / or /api/v1.
	for _, path := range []string{"/no/such/route-7f3a", "/api/v1/no-such-route-7f3a"} {
		status, _ = b.do(t, alice, "GET", path, "")
		require.Equal(t, http.StatusNotFound, status, path)
	}

	got := b.scrape(t)
	require.Equal(t, before+3, value(got, "fedhost_http_requests_total", route))
	require.Equal(t, 1.0, value(got, "fedhost_http_requests_total", map[string]string{"route": "/api/v1/deployments/:id", "status": "404"}),
		"an error answer counts with the status the error handler gave it")
	require.Equal(t, 1.0, value(got, "fedhost_http_requests_total", map[string]string{"route": "/api/v1/deployments", "status": "201"}))
	require.Equal(t, 1.0, value(got, "fedhost_http_requests_total", map[string]string{"route": "/api/v1", "status": "404"}))
	for _, m := range got["fedhost_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			require.NotContains(t, l.GetValue(), d.ID, "no label carries a path's id")
			require.NotContains(t, l.GetValue(), "7f3a", "an unknown path counts under a registered pattern")
		}
	}
	require.Equal(t, 0.0, value(got, "fedhost_builds_total", nil))
	require.Equal(t, 0.0, value(got, "fedhost_queue_jobs", map[string]string{"kind": "deploy", "state": "queued"}))
	_, present := got["fedhost_queue_jobs"]
	require.True(t, present, "an empty queue shows zeros")

	status, body = b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/submit", `{"domain":"acme.example.org","apps":{}}`)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var build struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &build))
	require.Eventually(t, func() bool {
		bd, err := b.st.GetBuild(context.Background(), build.ID)
		return err == nil && bd.State.Finished()
	}, time.Minute, 20*time.Millisecond)
	bd, err := b.st.GetBuild(context.Background(), build.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return value(b.scrape(t), "fedhost_builds_total", map[string]string{"operation": "deploy", "result": string(bd.State)}) == 1
	}, 10*time.Second, 20*time.Millisecond, "the build's verdict (%s) is counted", bd.State)
	got = b.scrape(t)
	require.Equal(t, 1.0, value(got, "fedhost_build_duration_seconds", map[string]string{"operation": "deploy"}))
	require.Equal(t, 0.0, value(got, "fedhost_queue_jobs", map[string]string{"kind": "deploy", "state": "running"}))

	// Names and help follow Prometheus' conventions.
	problems, err := testutil.GatherAndLint(b.mx.Registry)
	require.NoError(t, err)
	var ours []string
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "fedhost_") {
			ours = append(ours, p.Metric+": "+p.Text)
		}
	}
	require.Empty(t, ours)
}

// Loopback access goes by the connection's peer, whatever X-Real-IP says; token access
// wants the token, compared whole.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	get := func(t *testing.T, app *fiber.App, header ...string) (int, string) {
		t.Helper()
		req := httptest.NewRequest("GET", "/metrics", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := app.Test(req, -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}

	t.Run("loopback", func(t *testing.T) {
		t.Parallel()
		b := setupMetrics(t, "")
		resp, err := http.Get(b.url + "/metrics")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "a peer on 127.0.0.1")
		// app.Test's peer is 0.0.0.0: not loopback, and X-Real-IP from it is not believed.
		status, body := get(t, b.app, "X-Real-IP", "127.0.0.1", "X-Forwarded-For", "127.0.0.1")
		require.Equal(t, http.StatusForbidden, status, "%s", body)
		require.Equal(t, "metrics_loopback_only", errorCode(t, []byte(body)))
	})

	t.Run("token", func(t *testing.T) {
		t.Parallel()
		const token = "0123456789abcdef-metrics"
		b := setupMetrics(t, token)
		status, body := get(t, b.app)
		require.Equal(t, http.StatusUnauthorized, status, "%s", body)
		require.Equal(t, "unauthenticated", errorCode(t, []byte(body)))
		for _, wrong := range []string{"Bearer " + token[:len(token)-1], "Bearer " + token + "x", "Basic " + token} {
			status, body = get(t, b.app, "Authorization", wrong)
			require.Contains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, status, "%s: %s", wrong, body)
			require.NotContains(t, body, token[:8], "no answer shows the token")
		}
		status, body = get(t, b.app, "Authorization", "Bearer "+token)
		require.Equal(t, http.StatusOK, status, "from any peer with the token")
		require.Contains(t, body, "fedhost_http_requests_total")
		require.Contains(t, body, "go_goroutines", "the Go collector")
		resp, err := http.Get(b.url + "/metrics")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a loopback peer needs the token too")
	})

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		status, _ := get(t, b.app)
		require.Equal(t, http.StatusNotFound, status)
	})
}

// The certificate gauge is each app's soonest expiry from the tls rows; backups stale
// and failed count apps as the deployment page shows them.
func TestMetricsCertificatesAndBackups(t *testing.T) {
	t.Parallel()
	b := setupMetrics(t, "")
	ctx := context.Background()
	d, err := b.st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Name: "acme", Owner: "someone", Domain: "acme.example.org"})
	require.NoError(t, err)
	require.NoError(t, b.st.UpdateDeployment(ctx, d.ID, map[string]any{"state": deploy.StateActive}))
	soon, later := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	for name, notAfter := range map[string]time.Time{"miniflux-tls": later, "miniflux-tls2": soon} {
		res, err := json.Marshal(contract.TLSResult{Certificate: "-----BEGIN CERTIFICATE-----", NotAfter: notAfter.Format(time.RFC3339),
			Issuer: "test CA", RenewAfter: notAfter.Add(-30 * 24 * time.Hour).Format(time.RFC3339)})
		require.NoError(t, err)
		require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: name, App: "miniflux", Type: contract.TLS,
			Provider: "localca", Spec: `{"domains":["feeds.acme.example.org"]}`, Result: string(res), State: store.ResourceProvisioned}))
	}

	got := b.scrape(t)
	require.Equal(t, float64(soon.Unix()), value(got, "fedhost_certificate_expiry_timestamp_seconds", map[string]string{"deployment": d.ID, "app": "miniflux"}),
		"the soonest of the app's certificates")
	require.Len(t, got["fedhost_certificate_expiry_timestamp_seconds"].GetMetric(), 1)
	for _, l := range got["fedhost_certificate_expiry_timestamp_seconds"].GetMetric()[0].GetLabel() {
		require.NotContains(t, l.GetValue(), "example.org", "no label carries the operator's domain")
	}
	require.Equal(t, 0.0, value(got, "fedhost_backups_stale", nil))

	require.NoError(t, b.st.EnsureAppBackup(ctx, d.ID, "miniflux", time.Now().Add(-50*time.Hour)))
	require.NoError(t, b.st.EnsureAppBackup(ctx, d.ID, "pixelfed", time.Now().Add(-time.Hour)))
	require.NoError(t, b.st.BackupStarted(ctx, d.ID, "pixelfed", "b1", "schedule", time.Now()))
	require.NoError(t, b.st.BackupFinished(ctx, d.ID, "pixelfed", "", "restic: repository locked", time.Now()))
	got = b.scrape(t)
	require.Equal(t, 1.0, value(got, "fedhost_backups_stale", nil), "miniflux: no good backup for 50 hours")
	require.Equal(t, 1.0, value(got, "fedhost_backups_failed", nil), "pixelfed: its last backup failed")

	require.NoError(t, b.st.UpdateDeployment(ctx, d.ID, map[string]any{"state": deploy.StateSuspended}))
	got = b.scrape(t)
	require.Equal(t, 0.0, value(got, "fedhost_backups_stale", nil), "a suspended deployment is not backed up, so not stale")
}
