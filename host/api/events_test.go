package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/store"
)

type sseEvent struct {
	id, event, data string
}

func readStream(t *testing.T, b *bundle, cl client, path, lastEventID string) []sseEvent {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: cl.cookie})
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := b.app.Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// The event stream of a build delivers its progress in order, ends with the verdict, and
// a reconnect with Last-Event-ID resumes after the last event seen.
func TestBuildEventStreamInOrderAndResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"alice"}`)
	require.Equal(t, http.StatusCreated, status)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))

	ctx := context.Background()
	build, err := b.st.CreateBuild(ctx, d.ID)
	require.NoError(t, err)
	for i, msg := range []string{"planning", "creating miniflux-db", "creating miniflux-web", "node miniflux-web is healthy"} {
		_, err := b.st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: build.ID, Step: "provision", Level: "info", Message: msg, Progress: 25 * (i + 1)})
		require.NoError(t, err)
	}
	require.NoError(t, b.st.SetBuildState(ctx, build.ID, store.BuildSucceeded, ""))

	all := readStream(t, b, alice, "/api/v1/builds/"+build.ID+"/events", "")
	require.Len(t, all, 5)
	for i, e := range all[:4] {
		require.Equal(t, "progress", e.event)
		var p api.ProgressEvent
		require.NoError(t, json.Unmarshal([]byte(e.data), &p))
		require.Equal(t, i+1, p.Seq, "in order")
		require.Equal(t, e.id, strconv.Itoa(p.Seq))
		require.Equal(t, 25*(i+1), p.Progress)
	}
	require.Equal(t, "end", all[4].event)
	var end api.EndEvent
	require.NoError(t, json.Unmarshal([]byte(all[4].data), &end))
	require.Equal(t, "succeeded", end.State)
	require.NotNil(t, end.FinishedAt, "the end says when the build finished, so a live page can show its duration")

	resumed := readStream(t, b, alice, "/api/v1/builds/"+build.ID+"/events", "2")
	require.Len(t, resumed, 3, "events 3, 4 and the end")
	require.Equal(t, "3", resumed[0].id)
	require.Equal(t, "4", resumed[1].id)
	require.Equal(t, "end", resumed[2].event)

	bob := b.user(t, "bob", false)
	status, _ = b.do(t, bob, "GET", "/api/v1/builds/"+build.ID+"/events", "")
	require.Equal(t, http.StatusForbidden, status, "another operator cannot follow the build")
}
