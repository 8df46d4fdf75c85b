package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
)

// usersDouble answers the users routes as the API documents them and records the calls.
func usersDouble(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	record := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.Path)
	}
	expires := time.Date(2026, 12, 9, 0, 0, 0, 0, time.UTC)
	carol := api.DirectoryUser{}
	carol.Name, carol.DisplayName, carol.Groups = "carol", "Carol", []string{"miniflux-users"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/deployments/{id}/users", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		var body api.NewDirectoryUser
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		if body.Name != "carol" {
			answer(w, http.StatusBadRequest, map[string]api.Error{"error": {Code: "invalid", Location: "/name", Message: "a user name is 1 to 64 characters"}})
			return
		}
		require.Equal(t, []string{"miniflux-users"}, body.Groups)
		answer(w, http.StatusCreated, api.NewUserAnswer{User: carol, Link: api.PasswordLink{URL: "http://fedhost.test/set-password#tok", Purpose: "invitation", ExpiresAt: expires}})
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}/users", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		answer(w, http.StatusOK, []api.DirectoryUser{carol})
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}/groups", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		answer(w, http.StatusOK, []api.DirectoryGroup{{Name: "miniflux-admins", Members: []string{}, Roles: []api.GroupRole{{App: "miniflux", Description: "Miniflux administrators"}}}})
	})
	for _, route := range []string{"PUT /api/v1/deployments/{id}/users/{user}/groups/{group}", "DELETE /api/v1/deployments/{id}/users/{user}/groups/{group}", "POST /api/v1/deployments/{id}/users/{user}/disable"} {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			record(r)
			answer(w, http.StatusOK, carol)
		})
	}
	mux.HandleFunc("POST /api/v1/deployments/{id}/users/{user}/reset", func(w http.ResponseWriter, r *http.Request) {
		// carol's link is mailed; dave's mail fails and the link is shown.
		if r.PathValue("user") == "carol" {
			answer(w, http.StatusCreated, api.PasswordLink{Purpose: "reset", ExpiresAt: expires, SentTo: "carol@acme.test"})
			return
		}
		answer(w, http.StatusCreated, api.PasswordLink{URL: "http://fedhost.test/set-password#tok2", Purpose: "reset", ExpiresAt: expires,
			MailError: "the mail server refused RCPT TO (the user's address) with code 550: see the smtp provider's log"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
}

func TestDeploymentsUsers(t *testing.T) {
	t.Parallel()
	srv, calls := usersDouble(t)
	out, stderr, code := runCLI("deployments", "--server", srv.URL, "users", "add", "dep-1", "carol", "--group", "miniflux-users")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "http://fedhost.test/set-password#tok")
	require.Contains(t, out, "2026-12-09T00:00:00Z")

	out, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "list", "dep-1")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `carol\s+Carol\s+-\s+enabled\s+miniflux-users`, out)

	out, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "groups", "dep-1")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `miniflux-admins\s+0\s+miniflux: Miniflux administrators`, out)

	_, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "groups", "dep-1", "carol", "--add", "miniflux-admins", "--remove", "miniflux-users")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "disable", "dep-1", "carol")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []string{
		"POST /api/v1/deployments/dep-1/users", "GET /api/v1/deployments/dep-1/users", "GET /api/v1/deployments/dep-1/groups",
		"PUT /api/v1/deployments/dep-1/users/carol/groups/miniflux-admins", "DELETE /api/v1/deployments/dep-1/users/carol/groups/miniflux-users",
		"POST /api/v1/deployments/dep-1/users/carol/disable",
	}, calls())

	out, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "reset", "dep-1", "carol")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "sent to carol@acme.test")
	require.NotContains(t, out, "set-password")
	out, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "reset", "dep-1", "dave")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "could not be mailed: the mail server refused RCPT TO")
	require.Contains(t, out, "http://fedhost.test/set-password#tok2")

	_, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "add", "dep-1", "bad name")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "/name")
	_, stderr, code = runCLI("deployments", "--server", srv.URL, "users", "groups", "dep-1", "carol")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "--add GROUP")
}
