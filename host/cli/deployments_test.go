package cli_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/cli"
	"github.com/fedhost/fedhost/host/deploy"
)

const failReason = "app miniflux, request db (postgresql by postgresql): connection refused"

// apiDouble answers the few endpoints the tests need as the API documents them. A build
// runs for two polls; the build of deployment dep-fail fails.
type apiDouble struct {
	mu        sync.Mutex
	polls     map[string]int
	namespace string
}

func newAPIDouble(t *testing.T) (*apiDouble, *httptest.Server) {
	t.Helper()
	d := &apiDouble{polls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.namespace = req.Namespace
		d.mu.Unlock()
		answer(w, http.StatusCreated, api.Deployment{ID: "dep-1", Namespace: req.Namespace, Name: req.Namespace, State: "new"})
	})
	mux.HandleFunc("POST /api/v1/deployments/{id}/submit", func(w http.ResponseWriter, r *http.Request) {
		var cfg struct {
			Apps map[string]struct {
				Options map[string]any `json:"options"`
			} `json:"apps"`
		}
		if err := json.NewDecoder(r.Body).Decode(&cfg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, ok := cfg.Apps["miniflux"].Options["pollingFrequency"].(string); ok {
			answer(w, http.StatusBadRequest, map[string]api.Error{"error": {
				Code: "invalid_configuration", Location: "/apps/miniflux/options/pollingFrequency", Message: "must be of type integer",
			}})
			return
		}
		build := "b-ok"
		if r.PathValue("id") == "dep-fail" {
			build = "b-fail"
		}
		answer(w, http.StatusAccepted, api.Build{ID: build, DeploymentID: r.PathValue("id"), Operation: "deploy", State: "queued"})
	})
	mux.HandleFunc("POST /api/v1/deployments/{id}/preview", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, map[string]any{"changes": []map[string]string{
			{"action": "create", "kind": "resource", "name": "miniflux-db", "app": "miniflux", "type": "postgresql", "provider": "postgresql"},
			{"action": "create", "kind": "node", "name": "miniflux-web", "app": "miniflux", "type": "instance", "provider": "local"},
		}})
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}", func(w http.ResponseWriter, r *http.Request) {
		notAfter, renewAfter := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		answer(w, http.StatusOK, api.Deployment{ID: r.PathValue("id"), Namespace: "acme", Name: "acme", State: "active",
			Hosts: map[string]string{"pixelfed": "pixelfed.acme.example", "miniflux": "feeds.acme.example"},
			FrontDoor: &deploy.FrontDoorStatus{
				Apps: []deploy.AppFrontDoor{
					{App: "miniflux", Host: "feeds.acme.example", URL: "https://feeds.acme.example/", Live: true,
						Certificate: &deploy.CertificateStatus{State: deploy.CertificateValid, Issuer: "Pebble Intermediate CA", NotAfter: &notAfter, RenewAfter: &renewAfter}},
					{App: "pixelfed", Host: "pixelfed.acme.example", URL: "https://pixelfed.acme.example/",
						Certificate: &deploy.CertificateStatus{State: deploy.CertificateRenewalFailed, Issuer: "Pebble Intermediate CA", NotAfter: &notAfter, FailedBuildID: "b-renew"}},
				},
				Zone: &deploy.ZoneStatus{Name: "acme.example", Managed: true, Nameservers: []string{"ns1.host.example.", "ns2.host.example."},
					Records: []deploy.RecordStatus{{Name: "feeds.acme.example", Type: "A", Value: "203.0.113.7", State: deploy.RecordPublished},
						{Name: "pixelfed.acme.example", Type: "A", Value: "203.0.113.7", State: deploy.RecordPending}}},
			}})
	})
	mux.HandleFunc("GET /api/v1/builds/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		d.mu.Lock()
		d.polls[id]++
		n := d.polls[id]
		d.mu.Unlock()
		b := api.Build{ID: id, DeploymentID: "dep-1", Operation: "deploy", State: "running"}
		switch {
		case n <= 2:
		case id == "b-fail":
			b.State, b.Reason = "failed", failReason
		default:
			b.State = "succeeded"
		}
		answer(w, http.StatusOK, b)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return d, srv
}

func (d *apiDouble) createdNamespace() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.namespace
}

func (d *apiDouble) pollsOf(build string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.polls[build]
}

func answer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = cli.Main(args, &out, &errb)
	return out.String(), errb.String(), code
}

func configFile(t *testing.T, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o644))
	return path
}

const minifluxConfig = `{"domain": "acme.example", "apps": {"miniflux": {"enable": true, "options": {"pollingFrequency": 60}}}}`

func TestDeploymentsCreatePrintsID(t *testing.T) {
	t.Parallel()
	double, srv := newAPIDouble(t)

	out, stderr, code := runCLI("deployments", "--server", srv.URL, "create", "--namespace", "acme")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "dep-1\n", out)
	require.Equal(t, "acme", double.createdNamespace())
}

func TestDeploymentsServerDefaultsToListen(t *testing.T) {
	t.Parallel()
	_, srv := newAPIDouble(t)

	listen := strings.TrimPrefix(srv.URL, "http://")
	out, stderr, code := runCLI("--listen", listen, "deployments", "create", "--namespace", "acme")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "dep-1\n", out)
}

func TestDeploymentsSubmitWait(t *testing.T) {
	t.Parallel()

	t.Run("succeeded", func(t *testing.T) {
		t.Parallel()
		double, srv := newAPIDouble(t)
		out, stderr, code := runCLI("deployments", "--server", srv.URL, "submit", "dep-1",
			"--config", configFile(t, minifluxConfig), "--wait", "--poll-interval", "10ms")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, "build b-ok succeeded\n", out)
		require.Empty(t, stderr)
		require.Equal(t, 3, double.pollsOf("b-ok"), "polled while running, stopped when finished")
	})

	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		_, srv := newAPIDouble(t)
		out, stderr, code := runCLI("deployments", "--server", srv.URL, "submit", "dep-fail",
			"--config", configFile(t, minifluxConfig), "--wait", "--poll-interval", "10ms")
		require.Equal(t, 1, code)
		require.Equal(t, "build b-fail failed\n", out)
		require.Equal(t, "fedhost: build b-fail failed: "+failReason+"\n", stderr)
	})

	t.Run("without wait", func(t *testing.T) {
		t.Parallel()
		double, srv := newAPIDouble(t)
		out, stderr, code := runCLI("deployments", "--server", srv.URL, "submit", "dep-1", "--config", configFile(t, minifluxConfig))
		require.Equal(t, 0, code, stderr)
		require.Equal(t, "build b-ok queued\n", out)
		require.Zero(t, double.pollsOf("b-ok"))
	})
}

func TestDeploymentsSubmitInvalidConfiguration(t *testing.T) {
	t.Parallel()
	_, srv := newAPIDouble(t)
	config := `{"domain": "acme.example", "apps": {"miniflux": {"enable": true, "options": {"pollingFrequency": "hourly"}}}}`

	out, stderr, code := runCLI("deployments", "--server", srv.URL, "submit", "dep-1", "--config", configFile(t, config), "--wait")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "fedhost: invalid_configuration at /apps/miniflux/options/pollingFrequency: must be of type integer\n", stderr)
}

func TestDeploymentsPreviewTable(t *testing.T) {
	t.Parallel()
	_, srv := newAPIDouble(t)

	out, stderr, code := runCLI("deployments", "--server", srv.URL, "preview", "dep-1", "--config", configFile(t, minifluxConfig))
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ACTION\s+KIND\s+NAME\s+TYPE\s+PROVIDER$`, lines[0])
	require.Regexp(t, `^create\s+resource\s+miniflux-db\s+postgresql\s+postgresql$`, lines[1])
	require.Regexp(t, `^create\s+node\s+miniflux-web\s+instance\s+local$`, lines[2])
}

func TestDeploymentsUnreachableServer(t *testing.T) {
	t.Parallel()
	_, srv := newAPIDouble(t)
	srv.Close()

	_, stderr, code := runCLI("deployments", "--server", srv.URL, "create", "--namespace", "acme")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	require.Contains(t, stderr, "cannot reach the fedhost API at "+srv.URL)
}

func TestDeploymentsStatusShowsHostNames(t *testing.T) {
	t.Parallel()
	_, srv := newAPIDouble(t)

	out, stderr, code := runCLI("deployments", "--server", srv.URL, "status", "dep-1")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^host\s+miniflux\s+feeds\.acme\.example\nhost\s+pixelfed\s+pixelfed\.acme\.example$`, out, "by app")
}

// The status shows each app's URL and certificate, the records with their states and the
// nameservers to delegate to.
func TestDeploymentsStatusShowsTheFrontDoor(t *testing.T) {
	t.Parallel()
	_, srv := newAPIDouble(t)

	out, stderr, code := runCLI("deployments", "--server", srv.URL, "status", "dep-1")
	require.Equal(t, 0, code, stderr)
	for _, line := range []string{
		`url\s+miniflux\s+https://feeds\.acme\.example/ \(live\)`,
		`certificate\s+miniflux\s+valid, issued by Pebble Intermediate CA, expires 2026-07-01T00:00:00Z, renewed from 2026-06-01T00:00:00Z`,
		`url\s+pixelfed\s+https://pixelfed\.acme\.example/ \(not live yet\)`,
		"certificate\\s+pixelfed\\s+renewal failed, issued by Pebble Intermediate CA, expires 2026-07-01T00:00:00Z; the old certificate is served; why: `fedhost deployments build b-renew`",
		`zone\s+acme\.example\s+delegate the domain to ns1\.host\.example\., ns2\.host\.example\. at its registrar`,
		`record\s+feeds\.acme\.example\s+A 203\.0\.113\.7 \(published\)`,
		`record\s+pixelfed\.acme\.example\s+A 203\.0\.113\.7 \(pending\)`,
	} {
		require.Regexp(t, "(?m)^"+line+"$", out)
	}
}
