package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
)

// runDouble answers a run's routes as the API documents them: the POST queues run r1,
// the event stream sends two pieces of output, drops the connection once, and ends the
// run as the input's "state" says.
type runDouble struct {
	mu     sync.Mutex
	input  json.RawMessage
	afters []string
}

func newRunDouble(t *testing.T) (*runDouble, *httptest.Server) {
	t.Helper()
	d := &runDouble{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/deployments/{id}/apps/{app}/operations/{name}", func(w http.ResponseWriter, r *http.Request) {
		var req api.RunRequest
		b, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(b, &req))
		d.mu.Lock()
		d.input = req.Input
		d.mu.Unlock()
		if r.PathValue("name") != "export-opml" {
			answer(w, http.StatusNotFound, map[string]api.Error{"error": {Code: "not_found", Location: "/operation", Message: "app miniflux has no such operation"}})
			return
		}
		answer(w, http.StatusAccepted, api.Run{ID: "r1", App: r.PathValue("app"), Operation: r.PathValue("name"), State: "queued"})
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}/runs/{run}/events", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.afters = append(d.afters, r.URL.Query().Get("after"))
		first := len(d.afters) == 1
		var in struct {
			State string `json:"state"`
		}
		_ = json.Unmarshal(d.input, &in)
		d.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(seq int, stream, data string) {
			b, _ := json.Marshal(api.OutputEvent{Seq: seq, Stream: stream, Data: data, State: "running"})
			fmt.Fprintf(w, "id: %d\nevent: output\ndata: %s\n\n", seq, b)
		}
		if first {
			send(1, "fedhost", "run started")
			send(2, "stdout", "<opml>")
			return // the connection drops: the CLI resumes after 2
		}
		send(3, "stdout", "</opml>\n")
		send(4, "stderr", "exported\n")
		end, _ := json.Marshal(api.Run{ID: "r1", State: in.State, Reason: "exited with status 1"})
		fmt.Fprintf(w, ": waiting\n\nevent: end\ndata: %s\n\n", end)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return d, srv
}

func TestDeploymentsRunWaitFollowsTheOutput(t *testing.T) {
	t.Parallel()
	double, srv := newRunDouble(t)
	out, stderr, code := runCLI("deployments", "--server", srv.URL, "run", "dep-1", "miniflux", "export-opml",
		"--input", `{"username": "alice", "state": "succeeded"}`, "--wait")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "<opml></opml>\n", out, "the command's stdout, whole, across the reconnect")
	require.Equal(t, "fedhost: run started\nexported\n", stderr)
	require.Equal(t, []string{"0", "2"}, double.afters, "resumed after the last piece seen")
	require.JSONEq(t, `{"username": "alice", "state": "succeeded"}`, string(double.input))

	_, stderr, code = runCLI("deployments", "--server", srv.URL, "run", "dep-1", "miniflux", "export-opml",
		"--input", `{"state": "failed"}`, "--wait")
	require.Equal(t, 1, code)
	require.True(t, strings.HasSuffix(stderr, "fedhost: run r1 failed: exited with status 1\n"), stderr)
}

func TestDeploymentsRunRefusals(t *testing.T) {
	t.Parallel()
	_, srv := newRunDouble(t)
	out, stderr, code := runCLI("deployments", "--server", srv.URL, "run", "dep-1", "miniflux", "export-opml", "--input", `{"username": "alice"}`)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "run r1 queued\n", out)

	_, stderr, code = runCLI("deployments", "--server", srv.URL, "run", "dep-1", "miniflux", "make-coffee")
	require.Equal(t, 1, code)
	require.Equal(t, "fedhost: not_found at /operation: app miniflux has no such operation\n", stderr)

	_, stderr, code = runCLI("deployments", "--server", srv.URL, "run", "dep-1", "miniflux", "export-opml", "--input", `[1]`)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--input is not a JSON object")
}
