package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
)

// Metrics holds the host's registry and the series the host feeds.
type Metrics struct {
	// Registry is the host's own, not Prometheus' global default.
	Registry *prometheus.Registry

	builds         *prometheus.CounterVec
	buildDuration  *prometheus.HistogramVec
	pluginStarts   *prometheus.CounterVec
	pluginRestarts *prometheus.CounterVec
	pluginCalls    *prometheus.HistogramVec
	httpRequests   *prometheus.CounterVec
	httpDuration   *prometheus.HistogramVec
	logger         hclog.Logger
}

// buildBuckets span a build, from a trivial suspend to a first deploy that fetches images.
var buildBuckets = []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// New makes the registry, with the Go and process collectors; logger (none if nil)
// receives the errors of a scrape.
func New(logger hclog.Logger) *Metrics {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedhost_builds_total", Help: "Builds this process ran to their verdict, by operation and result (succeeded, failed, canceled).",
		}, []string{"operation", "result"}),
		buildDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fedhost_build_duration_seconds", Help: "How long builds ran, by operation.", Buckets: buildBuckets,
		}, []string{"operation"}),
		pluginStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedhost_plugin_starts_total", Help: "Plugin processes started and configured, restarts included, by plugin.",
		}, []string{"plugin"}),
		pluginRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedhost_plugin_restarts_total", Help: "Plugin processes started again after a crash or a failed health ping, by plugin.",
		}, []string{"plugin"}),
		pluginCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fedhost_plugin_call_duration_seconds", Help: "How long the host's calls to plugins took, by plugin and method.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300},
		}, []string{"plugin", "method"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedhost_http_requests_total", Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fedhost_http_request_duration_seconds", Help: "How long HTTP requests took to answer, by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		logger: logger,
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.builds, m.buildDuration, m.pluginStarts, m.pluginRestarts, m.pluginCalls, m.httpRequests, m.httpDuration,
	)
	return m
}

// ReadFrom adds the gauges read at each scrape: the queue from st, backups and
// certificates through e. Call it once, before serving.
func (m *Metrics) ReadFrom(st *store.Store, e *deploy.Engine) {
	m.Registry.MustRegister(&storeCollector{store: st, engine: e})
}

// BuildFinished counts a build that reached its verdict; the queue calls it.
func (m *Metrics) BuildFinished(operation string, state store.BuildState, took time.Duration) {
	m.builds.WithLabelValues(operation, string(state)).Inc()
	m.buildDuration.WithLabelValues(operation).Observe(took.Seconds())
}

// Started counts a plugin start (plugins.Observer).
func (m *Metrics) Started(plugin string) { m.pluginStarts.WithLabelValues(plugin).Inc() }

// Restarted counts a plugin restart (plugins.Observer).
func (m *Metrics) Restarted(plugin string) { m.pluginRestarts.WithLabelValues(plugin).Inc() }

// Called times a call to a plugin (plugins.Observer).
func (m *Metrics) Called(plugin, method string, took time.Duration) {
	m.pluginCalls.WithLabelValues(plugin, method).Observe(took.Seconds())
}

// Middleware counts and times every request by the route that matched it, the pattern
// (/api/v1/deployments/:id), never the path, so the labels stay few. Mount it before
// the routes; it answers a handler's error itself, to count the status it gets.
func (m *Metrics) Middleware() fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		if err := c.Next(); err != nil {
			if herr := c.App().ErrorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
		}
		route := c.Route().Path
		m.httpRequests.WithLabelValues(route, strconv.Itoa(c.Response().StatusCode())).Inc()
		m.httpDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		return nil
	}
}

// Handler answers a scrape in Prometheus' text (or negotiated) format. Who may call it
// is the caller's to check.
func (m *Metrics) Handler() fiber.Handler {
	return adaptor.HTTPHandler(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorLog: hclogAdapter{m.logger}, ErrorHandling: promhttp.ContinueOnError,
		// A scrape reads the store: two at a time at most.
		MaxRequestsInFlight: 2, Timeout: 10 * time.Second,
	}))
}

type hclogAdapter struct{ l hclog.Logger }

func (a hclogAdapter) Println(v ...any) { a.l.Error("answering a scrape", "error", v) }

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 5 * time.Second

var (
	queueJobs = prometheus.NewDesc("fedhost_queue_jobs",
		"Builds queued or running, of every host on the store, by operation (kind) and state.", []string{"kind", "state"}, nil)
	backupsStale = prometheus.NewDesc("fedhost_backups_stale",
		"Apps of backed-up deployments with no good backup for "+deploy.StaleAfter.String()+", as the deployment page shows them stale.", nil, nil)
	backupsFailed = prometheus.NewDesc("fedhost_backups_failed",
		"Apps of backed-up deployments whose last backup failed.", nil, nil)
	drillsFailed = prometheus.NewDesc("fedhost_restore_drills_failed",
		"Apps of backed-up deployments whose newest restore drill failed (their newest backup did not restore).", nil, nil)
	drillSuccess = prometheus.NewDesc("fedhost_restore_drill_last_success_timestamp_seconds",
		"When an app's newest good restore drill ended (unix seconds).", []string{"deployment", "app"}, nil)
	certificateExpiry = prometheus.NewDesc("fedhost_certificate_expiry_timestamp_seconds",
		"When the soonest certificate of a deployment's app expires (unix seconds).", []string{"deployment", "app"}, nil)
)

// storeCollector reads the gauges from the store at each scrape: a few queries, each
// over one table or two, whatever the number of deployments.
type storeCollector struct {
	store  *store.Store
	engine *deploy.Engine
}

func (s *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueJobs
	ch <- backupsStale
	ch <- backupsFailed
	ch <- drillsFailed
	ch <- drillSuccess
	ch <- certificateExpiry
}

func (s *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := s.store.UnfinishedBuildCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueJobs, err)
	} else {
		seen := map[[2]string]bool{}
		for _, c := range counts {
			seen[[2]string{c.Operation, string(c.State)}] = true
			ch <- prometheus.MustNewConstMetric(queueJobs, prometheus.GaugeValue, float64(c.Count), c.Operation, string(c.State))
		}
		// The operations are known: an empty queue shows zeros, not absent series.
		for _, op := range []string{store.OperationDeploy, store.OperationSuspend, store.OperationDestroy, store.OperationBackup, store.OperationRestore, store.OperationDrill, store.OperationExport, store.OperationRevokeExport} {
			for _, state := range []store.BuildState{store.BuildQueued, store.BuildRunning} {
				if !seen[[2]string{op, string(state)}] {
					ch <- prometheus.MustNewConstMetric(queueJobs, prometheus.GaugeValue, 0, op, string(state))
				}
			}
		}
	}
	if stale, failed, err := s.engine.BackupHealth(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(backupsStale, err)
	} else {
		ch <- prometheus.MustNewConstMetric(backupsStale, prometheus.GaugeValue, float64(stale))
		ch <- prometheus.MustNewConstMetric(backupsFailed, prometheus.GaugeValue, float64(failed))
	}
	if failed, good, err := s.engine.DrillHealth(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(drillsFailed, err)
	} else {
		ch <- prometheus.MustNewConstMetric(drillsFailed, prometheus.GaugeValue, float64(failed))
		for _, g := range good {
			ch <- prometheus.MustNewConstMetric(drillSuccess, prometheus.GaugeValue, float64(g.At.Unix()), g.DeploymentID, g.App)
		}
	}
	certs, err := s.engine.CertificateExpiries(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(certificateExpiry, err)
		return
	}
	for _, c := range certs {
		ch <- prometheus.MustNewConstMetric(certificateExpiry, prometheus.GaugeValue, float64(c.NotAfter.Unix()), c.DeploymentID, c.App)
	}
}

var (
	_ plugins.Observer     = (*Metrics)(nil)
	_ prometheus.Collector = (*storeCollector)(nil)
)
