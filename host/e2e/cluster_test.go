package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
)

// TestClusterOnOnePostgreSQL: three fedhost serve on one PostgreSQL (issue 16): any host
// answers the API with the same state, the 6th failed login of an account is refused
// whichever host gets it, and when the leader is killed with -9 another host is elected
// and schedules (it queues the periodic jobs again).
func TestClusterOnOnePostgreSQL(t *testing.T) {
	dsn := pgtest.DSN(t)
	hosts := make([]*host, 3)
	for i := range hosts {
		hosts[i] = startHost(t, "FEDHOST_DATABASE="+dsn)
	}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer db.Close(ctx)

	// Any host answers, with the state of all.
	d := hosts[0].create("cluster1")
	for i, h := range hosts {
		var got deployment
		require.Equal(t, http.StatusOK, h.call("GET", "/deployments/"+d.ID, nil, &got), "host %d", i)
		require.Equal(t, "cluster1", got.Namespace)
	}

	// The login throttle is shared: five failures spread over the hosts, then each refuses.
	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, hosts[i%3].call("POST", "/login", map[string]string{"name": "admin", "password": "guess"}, nil), "failure %d", i+1)
	}
	for i, h := range hosts {
		require.Equal(t, http.StatusTooManyRequests, h.call("POST", "/login", map[string]string{"name": "admin", "password": "guess"}, nil), "the 6th try on host %d", i)
	}

	// The leader: River's row names the client, whose ID ends with the host's data dir.
	leaderOf := func() (string, int) {
		var id string
		if err := db.QueryRow(ctx, `SELECT leader_id FROM river_leader WHERE expires_at > now()`).Scan(&id); err != nil {
			return "", -1
		}
		for i, h := range hosts {
			if h.cmd != nil && strings.HasSuffix(id, ":"+h.dataDir) {
				return id, i
			}
		}
		return id, -1
	}
	var leader string
	var li int
	require.Eventually(t, func() bool { leader, li = leaderOf(); return li >= 0 }, time.Minute, 100*time.Millisecond, "no host was elected")

	killed := time.Now()
	hosts[li].kill()
	var next string
	var ni int
	require.Eventually(t, func() bool { next, ni = leaderOf(); return ni >= 0 && next != leader }, 2*time.Minute, 100*time.Millisecond,
		"no other host took over from %s", leader)
	elected := time.Since(killed)
	var scheduled bool
	require.Eventually(t, func() bool {
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE kind = 'periodic' AND created_at > $1)`, killed).Scan(&scheduled)
		return err == nil && scheduled
	}, time.Minute, 100*time.Millisecond, "the new leader queued no periodic job")
	fmt.Printf("cluster: leader killed with -9; host %d elected after %s, scheduling again after %s\n",
		ni, elected.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	var got deployment
	require.Equal(t, http.StatusOK, hosts[ni].call("GET", "/deployments/"+d.ID, nil, &got), "a survivor answers")
}

// TestClusterHostKilledMidBuild: the host running a build is killed with -9; a survivor
// fails the build as lost within a bounded time. The deployment's `local` nodes are on
// the killed host, so the next submit, to a survivor, waits for that host and is failed
// once the host is unseen past the bound, saying to start it; once it is back, a submit
// completes (docs/architecture.md, cluster mode).
func TestClusterHostKilledMidBuild(t *testing.T) {
	dsn := pgtest.DSN(t)
	hosts := make([]*host, 3)
	for i := range hosts {
		hosts[i] = startHost(t, "FEDHOST_DATABASE="+dsn)
	}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer db.Close(ctx)

	d := hosts[0].create("kappa")
	b := hosts[1].submit(d.ID, minifluxConfig("kappa.example.org", nil))
	require.Eventually(t, func() bool {
		var got build
		hosts[2].call("GET", "/builds/"+b.ID, nil, &got)
		for _, e := range got.Events {
			if strings.HasPrefix(e.Message, "creating kappa") || strings.HasPrefix(e.Message, "creating miniflux") {
				return true
			}
		}
		return false
	}, 2*time.Minute, 5*time.Millisecond, "the build never started provisioning")
	var runner string
	require.NoError(t, db.QueryRow(ctx, `SELECT attempted_by[array_upper(attempted_by, 1)] FROM river_job WHERE kind = 'build' AND state = 'running'`).Scan(&runner))
	ri := -1
	for i, h := range hosts {
		if strings.HasSuffix(runner, ":"+h.dataDir) {
			ri = i
		}
	}
	require.GreaterOrEqual(t, ri, 0, "the build runs on none of the hosts: %s", runner)
	survivor := hosts[(ri+1)%3]

	killed := time.Now()
	hosts[ri].kill()
	lost := survivor.wait(b.ID)
	took := time.Since(killed)
	require.Equal(t, "failed", lost.State)
	require.Contains(t, lost.Reason, "lost")
	fmt.Printf("cluster: host %d killed with -9 mid-build; the build failed as lost after %s\n", ri, took.Round(time.Millisecond))
	// The deployment fails with its build: it is not left deploying with no build running.
	require.Eventually(t, func() bool { return survivor.deployment(d.ID).State == "failed" }, 10*time.Second, 50*time.Millisecond,
		"the lost build's deployment is %s", survivor.deployment(d.ID).State)

	// The next submit waits for the host of the nodes; once that host is unseen past the
	// bound, the leader fails it, saying where to start fedhost again.
	again := survivor.submit(d.ID, minifluxConfig("kappa.example.org", nil))
	stranded := survivor.wait(again.ID)
	require.Equal(t, "failed", stranded.State)
	require.Contains(t, stranded.Reason, "start fedhost there again")
	hosts[ri].start()
	done := survivor.wait(survivor.submit(d.ID, minifluxConfig("kappa.example.org", nil)).ID)
	require.Equal(t, "succeeded", done.State, "%+v", done)
	addr := survivor.deployment(d.ID).Nodes["miniflux-web"]["http"]
	require.Contains(t, signInPage(t, addr), "Sign In - Miniflux")
}
