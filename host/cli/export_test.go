package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
)

// export sends the target or the recipient, prints the string alone on stdout (so that
// it can be piped) and says on stderr that it is not shown again, and the answer's
// warning; it refuses neither or
// both of --target and --recipient before calling.
func TestDeploymentsExport(t *testing.T) {
	t.Parallel()
	var got api.ExportRequest
	warning := ""
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/deployments/{id}/export", func(w http.ResponseWriter, r *http.Request) {
		got = api.ExportRequest{}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		answer(w, http.StatusOK, api.ExportAnswer{ID: "x1", Build: "b-exp", ExpiresAt: time.Date(2026, 12, 9, 0, 0, 0, 0, time.UTC), Migration: "fedhost-migration-1:abc", Warning: warning})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	out, stderr, code := runCLI("deployments", "--server", srv.URL, "export", "dep-1", "--target", "https://b.example/")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "fedhost-migration-1:abc\n", out)
	require.Contains(t, stderr, "is not shown again")
	require.Contains(t, stderr, "2026-12-09T00:00:00Z")
	require.Equal(t, api.ExportRequest{Target: "https://b.example/"}, got)

	_, stderr, code = runCLI("deployments", "--server", srv.URL, "export", "dep-1", "--recipient", "age1pq1x")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, api.ExportRequest{Recipient: "age1pq1x"}, got)
	require.NotContains(t, stderr, "warning")

	warning = "public_url is not set: check the source URL"
	out, stderr, code = runCLI("deployments", "--server", srv.URL, "export", "dep-1", "--recipient", "age1pq1x")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "fedhost-migration-1:abc\n", out, "the warning is not on stdout, which may be piped")
	require.Contains(t, stderr, "warning: public_url is not set")

	for _, args := range [][]string{{}, {"--target", "https://b.example/", "--recipient", "age1pq1x"}} {
		_, stderr, code = runCLI(append([]string{"deployments", "--server", srv.URL, "export", "dep-1"}, args...)...)
		require.NotEqual(t, 0, code)
		require.Contains(t, stderr, "give one of --target")
	}
}
