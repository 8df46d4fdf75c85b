package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// manyItemsRSS is a feed of n items, published in the last n minutes (recent, so no
// cleanup archives them).
func manyItemsRSS(n int) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>Busy feed</title><link>https://busy.example.org/</link><description>many items</description>`)
	now := time.Now().UTC()
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `<item><title>Item %d</title><link>https://busy.example.org/items/%d</link><guid>https://busy.example.org/items/%d</guid><pubDate>%s</pubDate><description>Entry number %d of the busy feed, with a few words so that it is not empty.</description></item>`,
			i, i, i, now.Add(-time.Duration(i)*time.Minute).Format(time.RFC1123Z), i)
	}
	b.WriteString(`</channel></rss>`)
	return b.String()
}

// entriesTotal is the number of entries the Miniflux at addr has, or -1 when it does
// not answer yet.
func entriesTotal(tb testing.TB, addr, password string) int {
	code, body := minifluxAPI(tb, addr, "admin", password, "GET", "/v1/entries?limit=1", nil)
	if code != http.StatusOK {
		return -1
	}
	var page struct {
		Total int `json:"total"`
	}
	require.NoError(tb, json.Unmarshal(body, &page))
	return page.Total
}

// eventTime is the time of the first event of bu whose message contains s.
func eventTime(tb testing.TB, bu build, s string) time.Time {
	for _, e := range bu.Events {
		if strings.Contains(e.Message, s) {
			return e.Time
		}
	}
	require.Failf(tb, "no such event", "no event says %q: %+v", s, bu.Events)
	return time.Time{}
}

// BenchmarkMoveMiniflux10000Entries measures the downtime of a move of a Miniflux with
// 10,000 entries (made by Miniflux itself, from a feed of 10,000 items) from one fedhost
// (A) to another (B): from the export's start (A stops Miniflux) to B's Miniflux serving
// the 10,000 entries, split from the builds' events into A's final snapshot (restic
// backup of the database) and B's restore (restic restore into B's database); the rest
// is the export's other steps, the import's checks and B's build. Not in `make bench`:
// run it alone with
//
//	go test -run '^$' -bench MoveMiniflux10000Entries -benchtime 1x -count 1 ./host/e2e/
func BenchmarkMoveMiniflux10000Entries(b *testing.B) {
	const entries = 10000
	feed := manyItemsRSS(entries)
	feedServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(feed))
	}))
	defer feedServer.Close()
	a, bh := startHost(b), startHost(b)
	var downtimes, snapshots, restores []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := fmt.Sprintf("busy%d", i)
		d := a.create(ns)
		options := map[string]any{"fetcherAllowPrivateNetworks": true}
		require.Equal(b, "succeeded", a.wait(a.submit(d.ID, minifluxConfig(ns+".example.org", options)).ID).State)
		addr := a.deployment(d.ID).Nodes["miniflux-web"]["http"]
		password := a.nodeFile(ns, "miniflux-web", "admin-password")
		code, body := minifluxAPI(b, addr, "admin", password, "POST", "/v1/feeds", map[string]any{"feed_url": feedServer.URL + "/rss"})
		require.Equal(b, http.StatusCreated, code, "%s", body)
		require.Eventually(b, func() bool { return entriesTotal(b, addr, password) == entries }, 5*time.Minute, time.Second,
			"A's Miniflux did not store the %d entries", entries)
		b.StartTimer()

		start := time.Now()
		var x exportAnswer
		require.Equal(b, http.StatusOK, a.call("POST", "/deployments/"+d.ID+"/export", map[string]string{"target": "http://" + bh.addr + "/"}, &x))
		var imported importAnswer
		require.Equal(b, http.StatusAccepted, bh.call("POST", "/deployments/import", map[string]any{"migration": x.Migration}, &imported))
		done := bh.wait(imported.Build)
		require.Equal(b, "succeeded", done.State, "%+v", done)
		baddr := bh.deployment(imported.Deployment).Nodes["miniflux-web"]["http"]
		require.Eventually(b, func() bool { return entriesTotal(b, baddr, password) == entries }, time.Minute, 50*time.Millisecond,
			"B's Miniflux does not serve the %d entries", entries)
		downtime := time.Since(start)

		b.StopTimer()
		var exp build
		require.Equal(b, http.StatusOK, a.call("GET", "/builds/"+x.Build, nil, &exp))
		snapshot := eventTime(b, exp, "final backup ").Sub(eventTime(b, exp, "the nodes are stopped"))
		restore := eventTime(b, done, "restored from the source's snapshot").Sub(eventTime(b, done, "restoring miniflux from"))
		downtimes, snapshots, restores = append(downtimes, downtime), append(snapshots, snapshot), append(restores, restore)
		b.Logf("move of %d entries: downtime %s (final snapshot %s, restore %s, the rest %s)", entries, downtime.Round(time.Millisecond),
			snapshot.Round(time.Millisecond), restore.Round(time.Millisecond), (downtime - snapshot - restore).Round(time.Millisecond))
		b.StartTimer()
	}
	b.StopTimer()
	mean := func(ds []time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return sum.Seconds() / float64(len(ds))
	}
	b.ReportMetric(mean(downtimes), "downtime-s")
	b.ReportMetric(mean(snapshots), "snapshot-s")
	b.ReportMetric(mean(restores), "restore-s")
}
