package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
)

// sseEvent is one event of a build's stream as a browser gets it, and when.
type sseEvent struct {
	Seq     int
	Kind    string
	Time    time.Time // the event's time in the store (its insert)
	Arrived time.Time
}

// followBuild reads the Server-Sent Events of build id from h until the "end" event, as a
// browser's EventSource would, and sends what it read on out.
func (h *host) followBuild(id string, connected chan<- struct{}, out chan<- []sseEvent, fail chan<- error) {
	req, err := http.NewRequest("GET", "http://"+h.addr+"/api/v1/builds/"+id+"/events", nil)
	if err != nil {
		fail <- err
		return
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fail <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail <- fmt.Errorf("GET /builds/%s/events: status %d", id, resp.StatusCode)
		return
	}
	connected <- struct{}{}
	var got []sseEvent
	var e sseEvent
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			e.Seq, _ = strconv.Atoi(strings.TrimPrefix(line, "id: "))
		case strings.HasPrefix(line, "event: "):
			e.Kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data struct {
				Time time.Time `json:"time"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data)
			e.Time, e.Arrived = data.Time, time.Now()
		case line == "" && e.Kind != "":
			got = append(got, e)
			if e.Kind == "end" {
				out <- got
				return
			}
			e = sseEvent{}
		}
	}
	fail <- fmt.Errorf("the stream of build %s on %s ended before its end event: %v", id, h.addr, lines.Err())
}

// TestClusterEventsOnAnyHost: a browser following a build's live events on a host other
// than the one running the build gets every event, in order, up to the end; the delay
// from an event's insert to its arrival is printed (the streams poll the events table,
// docs/architecture.md).
func TestClusterEventsOnAnyHost(t *testing.T) {
	dsn := pgtest.DSN(t)
	hosts := []*host{startHost(t, "FEDHOST_DATABASE="+dsn), startHost(t, "FEDHOST_DATABASE="+dsn)}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer db.Close(ctx)

	d := hosts[0].create("sigma")
	b := hosts[0].submit(d.ID, minifluxConfig("sigma.example.org", nil))
	connected, fail := make(chan struct{}, len(hosts)), make(chan error, len(hosts))
	streams := make([]chan []sseEvent, len(hosts))
	for i, h := range hosts {
		streams[i] = make(chan []sseEvent, 1)
		go h.followBuild(b.ID, connected, streams[i], fail)
	}
	for range hosts {
		select {
		case <-connected:
		case err := <-fail:
			t.Fatal(err)
		}
	}
	since := time.Now()

	got := make([][]sseEvent, len(hosts))
	for i := range hosts {
		select {
		case got[i] = <-streams[i]:
		case err := <-fail:
			t.Fatal(err)
		case <-time.After(5 * time.Minute):
			t.Fatalf("the stream on host %d did not end", i)
		}
	}
	done := hosts[1].wait(b.ID)
	require.Equal(t, "succeeded", done.State, "%+v", done)

	var runner string
	require.NoError(t, db.QueryRow(ctx, `SELECT attempted_by[array_upper(attempted_by, 1)] FROM river_job WHERE kind = 'build' AND args->>'build_id' = $1`, b.ID).Scan(&runner))
	want := make([]int, 0, len(done.Events))
	for _, e := range done.Events {
		want = append(want, e.Seq)
	}
	elsewhere := 0
	for i, h := range hosts {
		where := "elsewhere"
		if strings.HasSuffix(runner, ":"+h.dataDir) {
			where = "the build's host"
		} else {
			elsewhere++
		}
		events := got[i]
		require.Equal(t, "end", events[len(events)-1].Kind, "host %d (%s): the stream ends with its end event", i, where)
		var seqs []int
		var delays []time.Duration
		for _, e := range events[:len(events)-1] {
			seqs = append(seqs, e.Seq)
			if e.Time.After(since) {
				delays = append(delays, e.Arrived.Sub(e.Time))
			}
		}
		require.Equal(t, want, seqs, "host %d (%s): every event, in order, once", i, where)
		require.NotEmpty(t, delays, "host %d: no event was inserted while the stream was open", i)
		slices.Sort(delays)
		fmt.Printf("cluster: build events on host %d (%s): %d events, insert to arrival p50 %s, p90 %s, max %s (%d timed)\n", i, where, len(seqs),
			delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)*9/10].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond), len(delays))
	}
	require.Equal(t, len(hosts)-1, elsewhere, "the build ran on one of the hosts: %s", runner)
}

// trySubmit submits config to deployment id and returns the status (0 if no answer came)
// and the build's ID if one was accepted; unlike submit it lets an error be the answer.
func (h *host) trySubmit(id string, config any) (int, string) {
	raw, err := json.Marshal(config)
	require.NoError(h.t, err)
	req, err := http.NewRequest("POST", "http://"+h.addr+"/api/v1/deployments/"+id+"/submit", bytes.NewReader(raw))
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.token)
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var b build
	_ = json.NewDecoder(resp.Body).Decode(&b)
	return resp.StatusCode, b.ID
}

// TestClusterPostgreSQLRestarted: the PostgreSQL of two hosts is restarted under them while
// submits are sent: every submit is answered with an error or is queued and builds, the
// hosts serve again and a new submit completes; the times to recover are printed.
func TestClusterPostgreSQLRestarted(t *testing.T) {
	srv := pgtest.NewServer(t)
	dsn := srv.DSN()
	hcl := filepath.Join(t.TempDir(), "fedhost.hcl")
	require.NoError(t, os.WriteFile(hcl, []byte("app \"hello\" {\n  settings = { footer = \"Hosted by Example\" }\n}\n"), 0o600))
	plugins := helloDirs(t)
	hosts := []*host{
		startHost(t, "FEDHOST_DATABASE="+dsn, "FEDHOST_PLUGIN_DIR="+plugins, "FEDHOST_CONFIG="+hcl),
		startHost(t, "FEDHOST_DATABASE="+dsn, "FEDHOST_PLUGIN_DIR="+plugins, "FEDHOST_CONFIG="+hcl),
	}
	config := func(name string) map[string]any {
		return map[string]any{"domain": name + ".example.org", "apps": map[string]any{
			"hello": map[string]any{"enable": true, "options": map[string]any{"greeting": "Hello from " + name}}}}
	}
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = hosts[i%2].create(fmt.Sprintf("pgre%d", i)).ID
	}
	type submitted struct {
		deployment, build string
		status            int
	}
	var subs []submitted
	send := func(i int) int {
		status, b := hosts[i%2].trySubmit(ids[i], config(fmt.Sprintf("pgre%d", i)))
		subs = append(subs, submitted{ids[i], b, status})
		return status
	}

	// One submit before the restart, two while PostgreSQL is down, then more until one is
	// accepted again.
	require.Equal(t, http.StatusAccepted, send(0))
	srv.Stop()
	stopped := time.Now()
	send(1)
	send(2)
	time.Sleep(2 * time.Second)
	srv.Start()
	restarted := time.Now()
	fmt.Printf("cluster: PostgreSQL down for %s (immediate shutdown, then started on the same port)\n", restarted.Sub(stopped).Round(time.Millisecond))

	for i, h := range hosts {
		require.Eventually(t, func() bool {
			var d deployment
			return h.callStatus("GET", "/deployments/"+ids[0], &d) == http.StatusOK && d.ID == ids[0]
		}, 2*time.Minute, 50*time.Millisecond, "host %d does not answer after the restart", i)
		fmt.Printf("cluster: host %d answers the API %s after PostgreSQL started again\n", i, time.Since(restarted).Round(time.Millisecond))
	}
	next := 3
	require.Eventually(t, func() bool { return send(next) == http.StatusAccepted }, 2*time.Minute, 200*time.Millisecond, "no submit is accepted after the restart")
	accepted := time.Since(restarted)
	next++
	require.Equal(t, http.StatusAccepted, send(next), "the other host accepts a submit")

	statuses := make([]int, 0, len(subs))
	for _, s := range subs {
		statuses = append(statuses, s.status)
	}
	fmt.Printf("cluster: the submits were answered %v (0: no answer)\n", statuses)
	for _, s := range subs {
		switch {
		case s.status == http.StatusAccepted:
			done := hosts[1].wait(s.build)
			require.Equal(t, "succeeded", done.State, "an accepted submit builds: %+v", done)
			var attempts []string
			for _, e := range done.Events {
				if strings.HasPrefix(e.Message, "build started") {
					attempts = append(attempts, e.Time.Sub(stopped).Round(time.Millisecond).String())
				}
			}
			fmt.Printf("cluster: build %s started at %v from the stop, finished with %d events\n", s.build, attempts, len(done.Events))
		default:
			require.True(t, s.status == 0 || s.status >= 500, "a submit during the outage is answered with an error, not %d", s.status)
			// Refused, so it left no build behind that waits for ever.
			d := hosts[0].deployment(s.deployment)
			if d.LastBuild != nil {
				require.NotEqual(t, "queued", hosts[0].wait(d.LastBuild.ID).State)
			}
		}
	}
	fmt.Printf("cluster: PostgreSQL restarted under 2 hosts: a submit accepted again %s after, every accepted one of %d submits built %s after\n",
		accepted.Round(time.Millisecond), len(subs), time.Since(restarted).Round(time.Millisecond))
}

// callStatus is call for a host that may not answer: the status, or 0 if no answer came.
func (h *host) callStatus(method, path string, out any) int {
	req, err := http.NewRequest(method, "http://"+h.addr+"/api/v1"+path, nil)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+h.token)
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if json.NewDecoder(resp.Body).Decode(out) != nil {
		return 0
	}
	return resp.StatusCode
}
