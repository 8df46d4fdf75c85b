package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/metrics"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// BenchmarkScrape answers GET /metrics over a store of 1,000 active deployments, each
// with two certificates, a build and the backup records of two apps.
func BenchmarkScrape(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: b.TempDir()})
	require.NoError(b, err)
	engine := deploy.New(deploy.Options{Store: st, Plugins: m})
	notAfter := time.Now().Add(60 * 24 * time.Hour)
	res, err := json.Marshal(contract.TLSResult{Certificate: "-----BEGIN CERTIFICATE-----", NotAfter: notAfter.Format(time.RFC3339),
		Issuer: "bench CA", RenewAfter: notAfter.Add(-30 * 24 * time.Hour).Format(time.RFC3339)})
	require.NoError(b, err)
	const deployments = 1000
	for i := range deployments {
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: fmt.Sprintf("ns%d", i), Name: "d", Owner: "o"})
		require.NoError(b, err)
		require.NoError(b, st.UpdateDeployment(ctx, d.ID, map[string]any{"state": deploy.StateActive}))
		_, err = st.CreateBuild(ctx, d.ID)
		require.NoError(b, err)
		for _, app := range []string{"miniflux", "pixelfed"} {
			require.NoError(b, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: app + "-tls", App: app, Type: contract.TLS,
				Provider: "localca", Spec: `{"domains":["x.example.org"]}`, Result: string(res), State: store.ResourceProvisioned}))
			require.NoError(b, st.EnsureAppBackup(ctx, d.ID, app, time.Now().Add(-time.Hour)))
		}
	}
	mx := metrics.New(nil)
	mx.ReadFrom(st, engine)
	app := fiber.New()
	app.Get("/metrics", mx.Handler())
	b.ResetTimer()
	for b.Loop() {
		resp, err := app.Test(httptest.NewRequest("GET", "/metrics", nil), -1)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("scrape: %v %v", err, resp)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.ReportMetric(float64(n), "bytes/scrape")
	}
}
