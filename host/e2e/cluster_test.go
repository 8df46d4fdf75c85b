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
