package e2e

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/scalegen"
)

// scaleTick is the scheduler tick's own log line (host/queue), with its duration.
var scaleTick = regexp.MustCompile(`periodic job ran: job=scheduler-tick seconds=([0-9.e+-]+)`)

// BenchmarkScale runs one `fedhost serve` on PostgreSQL holding FEDHOST_SCALE_DEPLOYMENTS
// deployments (10,000 by default) made by internal/scalegen, owned by 300 operators, each
// with five resources, four builds of 25 events, a backup record and four audit events.
// It loads with wrk (2 threads, 32 connections, 10 s each) the deployments page as the
// superuser and as an operator, the API list (first page), one deployment's page, the
// audit events (first page), and reports the scheduler tick's duration from its log
// line and the host's resident memory. One iteration is the whole measurement: run it
// with -benchtime 1x. FEDHOST_SCALE_ONLY names the URLs to measure (page-root,
// page-operator, api-root, api-operator, deployment, audit, audit-own, jobs) and
// FEDHOST_SCALE_CONNECTIONS wrk's connections (32).
func BenchmarkScale(b *testing.B) {
	wrk := lookWrk(b)
	n := 10000
	if v := os.Getenv("FEDHOST_SCALE_DEPLOYMENTS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, "FEDHOST_SCALE_DEPLOYMENTS: give a number of deployments")
	}
	dsn := pgtest.DSN(b)
	// The host first, so that the store holds its catalog revision: the deployments are
	// generated at it, and no automatic update is due.
	h := startHost(b, "FEDHOST_DATABASE="+dsn, "FEDHOST_UPDATE_CHECK_INTERVAL=20s", "FEDHOST_LOG_LEVEL=info")
	started := time.Now()
	f, err := scalegen.Fill(context.Background(), dsn, scalegen.Options{Deployments: n})
	require.NoError(b, err)
	b.Logf("scalegen: %d deployments in %s", n, time.Since(started).Round(time.Second))
	b.ReportMetric(time.Since(started).Seconds(), "fill-s")

	base := "http://" + h.addr
	root, operator := "Cookie: fedhost_session="+f.SuperuserSession, "Cookie: fedhost_session="+f.OperatorSession
	page := get(b, base+"/deployments", root)
	require.Contains(b, page, `<a href="/deployments/`, "the superuser's deployments page lists deployments")
	require.Contains(b, get(b, base+"/deployments", operator), `<a href="/deployments/`)
	require.Contains(b, get(b, base+"/deployments/"+f.Deployment, operator), f.Deployment)
	require.Contains(b, get(b, base+"/api/v1/deployments", "Authorization: Bearer "+f.SuperuserToken), `"id"`)
	require.Contains(b, get(b, base+"/api/v1/audit-events", "Authorization: Bearer "+f.SuperuserToken), `"seq"`)

	require.Contains(b, get(b, base+"/admin/jobs", root), "/deployments/")

	// FEDHOST_SCALE_ONLY=jobs,audit-own measures only the URLs named (a profile of one);
	// FEDHOST_SCALE_CONNECTIONS=4 loads with 4 connections instead of 32.
	only := os.Getenv("FEDHOST_SCALE_ONLY")
	conns := 32
	if v := os.Getenv("FEDHOST_SCALE_CONNECTIONS"); v != "" {
		conns, err = strconv.Atoi(v)
		require.NoError(b, err, "FEDHOST_SCALE_CONNECTIONS: give a number of connections")
		require.Positive(b, conns, "FEDHOST_SCALE_CONNECTIONS: give a number of connections")
	}
	b.Logf("serve: pid %d", h.cmd.Process.Pid)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, m := range []struct{ name, path, header string }{
			{"page-root", "/deployments", root},
			{"page-operator", "/deployments", operator},
			{"api-root", "/api/v1/deployments", "Authorization: Bearer " + f.SuperuserToken},
			{"api-operator", "/api/v1/deployments", "Authorization: Bearer " + f.OperatorToken},
			{"deployment", "/deployments/" + f.Deployment, operator},
			{"audit", "/api/v1/audit-events", "Authorization: Bearer " + f.SuperuserToken},
			{"audit-own", "/api/v1/me/audit-events", "Authorization: Bearer " + f.OperatorToken},
			{"jobs", "/admin/jobs", root},
		} {
			if only != "" && !slices.Contains(strings.Split(only, ","), m.name) {
				continue
			}
			r := runWrkConns(b, wrk, base+m.path, m.header, conns)
			b.ReportMetric(r.rps, m.name+"-req/s")
			b.ReportMetric(ms(r.p99), m.name+"-p99-ms")
		}
	}
	b.StopTimer()
	// The ticks while wrk ran share the 2 cores with it; the one measured starts after
	// (every 20 s).
	during := len(scaleTick.FindAllStringSubmatch(h.log.String(), -1))
	var ticks []string
	require.Eventually(b, func() bool {
		ticks = nil
		for _, m := range scaleTick.FindAllStringSubmatch(h.log.String(), -1) {
			ticks = append(ticks, m[1])
		}
		return len(ticks) >= during+2
	}, 5*time.Minute, time.Second, "no scheduler tick after the fill:\n%s", h.log)
	tick, err := strconv.ParseFloat(ticks[len(ticks)-1], 64)
	require.NoError(b, err)
	b.Logf("scheduler ticks (s), %d of them while wrk ran: %s", during, strings.Join(ticks, " "))
	b.ReportMetric(tick*1000, "tick-ms")
	rss, hwm := procMemory(b, h.cmd.Process.Pid)
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(hwm, "peak-rss-MiB")
}

func lookWrk(b *testing.B) string {
	const wrk = "/usr/bin/wrk"
	if _, err := os.Stat(wrk); err != nil {
		b.Fatalf("no %s (%v): install the Debian package: apt-get install wrk", wrk, err)
	}
	return wrk
}

// procMemory reads a process's resident memory and its peak, in MiB.
func procMemory(b *testing.B, pid int) (rss, peak float64) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		require.NoError(b, err)
		if name == "VmRSS" {
			rss = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return rss, peak
}
