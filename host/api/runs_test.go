package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/store"
)

// An operation's input is checked against its schema before anything is queued: a
// missing required input, a wrong type, an unknown operation or app are refused naming
// them, and no run is stored. A valid run is queued with its input.
func TestRunInputIsCheckedBeforeAnythingIsQueued(t *testing.T) {
	t.Parallel()
	b := setupWithApps(t)
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	status, body = b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/submit", `{"domain":"acme.example.org","apps":{"miniflux":{"enable":true}}}`)
	require.Equal(t, http.StatusAccepted, status, "%s", body)

	status, body = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID+"/operations", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var ops []api.AppOperation
	require.NoError(t, json.Unmarshal(body, &ops))
	names := map[string]api.AppOperation{}
	for _, op := range ops {
		require.Equal(t, "miniflux", op.App)
		names[op.Name] = op
	}
	require.NotContains(t, names, "backup", "the host's own operations have their own route")
	require.Contains(t, names, "create-user")
	require.Equal(t, 300, names["create-user"].TimeoutSeconds, "the default timeout")
	require.Equal(t, "feeds.opml", names["export-opml"].OutputFile)

	refused := func(path, body string, wantStatus int, wantLocation string) {
		t.Helper()
		status, answer := b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+path, body)
		require.Equal(t, wantStatus, status, "%s", answer)
		var e struct {
			Error api.Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal(answer, &e))
		require.Equal(t, wantLocation, e.Error.Location, "%s", answer)
		require.NotContains(t, string(answer), "pass-of-bob", "no error echoes the input")
	}
	refused("/apps/miniflux/operations/create-user", `{"input":{"username":"bob"}}`, http.StatusBadRequest, "/input/password")
	refused("/apps/miniflux/operations/create-user", `{"input":{"username":5,"password":"pass-of-bob"}}`, http.StatusBadRequest, "/input/username")
	refused("/apps/miniflux/operations/create-user", `{"input":{"username":"bob","password":"pass-of-bob","extra":1}}`, http.StatusBadRequest, "/input/extra")
	refused("/apps/miniflux/operations/refresh-feeds", `{"input":{"all":true}}`, http.StatusBadRequest, "/input")
	refused("/apps/miniflux/operations/make-coffee", `{}`, http.StatusNotFound, "/operation")
	refused("/apps/pixelfed/operations/create-user", `{}`, http.StatusNotFound, "/app")
	refused("/apps/miniflux/operations/backup", `{}`, http.StatusNotFound, "/operation")

	runs, err := b.st.ListRuns(context.Background(), d.ID, 100)
	require.NoError(t, err)
	require.Empty(t, runs, "nothing was queued")

	status, body = b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/apps/miniflux/operations/export-opml", `{"input":{"username":"bob"}}`)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var run api.Run
	require.NoError(t, json.Unmarshal(body, &run))
	require.Equal(t, string(store.RunQueued), run.State)
	require.Equal(t, "alice", run.Actor)
	require.Equal(t, store.RunManual, run.Trigger)
	require.JSONEq(t, `{"username":"bob"}`, string(run.Input))
	require.Equal(t, "feeds.opml", run.OutputFile)

	status, body = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID+"/runs", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var list []api.Run
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list, 1)
	require.Equal(t, run.ID, list[0].ID)

	status, _ = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID+"/runs/"+run.ID+"/output", "")
	require.Equal(t, http.StatusConflict, status, "no output before the run ends")
	status, body = b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/runs/"+run.ID+"/cancel", "")
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	require.NoError(t, json.Unmarshal(body, &run))
	require.Equal(t, string(store.RunCanceled), run.State)
	require.Equal(t, "canceled by alice before it ran", run.Reason)

	events, err := b.st.AuditEvents(context.Background(), 0, 100)
	require.NoError(t, err)
	var asked int
	for _, e := range events {
		if e.Action == "deployment.run" && e.Result == "ok" {
			asked++
			require.Equal(t, run.ID, e.Subject)
		}
	}
	require.Equal(t, 1, asked, "the run is an audit event")

	bob := b.user(t, "bob", false)
	status, _ = b.do(t, bob, "GET", "/api/v1/deployments/"+d.ID+"/runs/"+run.ID, "")
	require.Equal(t, http.StatusForbidden, status, "another operator's runs are not shown")

	// Schedules: a secret input cannot be scheduled; a valid one is listed with its next
	// time, and removed.
	sched := "/api/v1/deployments/" + d.ID + "/apps/miniflux/operations/"
	status, body = b.do(t, alice, "POST", sched+"create-user/schedules", `{"cron": "0 3 * * *", "input": {"username": "bob", "password": "pass-of-bob"}}`)
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	require.Contains(t, string(body), `"location":"/input/password"`)
	require.NotContains(t, string(body), "pass-of-bob")
	status, body = b.do(t, alice, "POST", sched+"refresh-feeds/schedules", `{"cron": "every night"}`)
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	require.Contains(t, string(body), `"location":"/cron"`)
	status, body = b.do(t, alice, "POST", sched+"export-opml/schedules", `{"cron": "@daily", "input": {"username": "bob"}}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var s api.Schedule
	require.NoError(t, json.Unmarshal(body, &s))
	require.Equal(t, "alice", s.Actor)
	require.True(t, s.NextAt.After(time.Now()))
	status, body = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID+"/schedules", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var schedules []api.Schedule
	require.NoError(t, json.Unmarshal(body, &schedules))
	require.Len(t, schedules, 1)
	status, _ = b.do(t, bob, "DELETE", "/api/v1/deployments/"+d.ID+"/schedules/"+s.ID, "")
	require.Equal(t, http.StatusForbidden, status)
	status, _ = b.do(t, alice, "DELETE", "/api/v1/deployments/"+d.ID+"/schedules/"+s.ID, "")
	require.Equal(t, http.StatusNoContent, status)
}
