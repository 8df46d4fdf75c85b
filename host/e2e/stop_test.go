package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A clean stop of fedhost serve (Ctrl-C, or SIGTERM) ends the app nodes with the managed
// servers they use, so no app runs without its database; the next start brings the
// active deployment's nodes back, on their addresses, without a new submit.
func TestCleanStopEndsNodesAndTheNextStartBringsThemBack(t *testing.T) {
	h := startHost(t)
	d := h.create("delta")
	b := h.wait(h.submit(d.ID, minifluxConfig("delta.example.org", nil)).ID)
	require.Equal(t, "succeeded", b.State, "%+v", b)
	addr := h.deployment(d.ID).Nodes["miniflux-web"]["http"]
	require.True(t, answers(addr), "Miniflux answers after the deploy")
	node := h.nodePID("delta", "miniflux-web")
	postmaster := h.postmasterPID()

	for i, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		h.stopWith(sig)
		require.False(t, running(node), "%s: Miniflux (pid %d) runs after fedhost stopped", sig, node)
		require.Eventually(t, func() bool { return !running(postmaster) }, 10*time.Second, 50*time.Millisecond,
			"%s: the managed PostgreSQL (pid %d) runs after fedhost stopped", sig, postmaster)
		require.False(t, answers(addr), "%s: Miniflux answers after fedhost stopped", sig)

		h.start()
		require.Eventually(t, func() bool { return answers(addr) }, 2*time.Minute, 250*time.Millisecond,
			"after stop %d (%s) and a new start, Miniflux does not answer on %s", i+1, sig, addr)
		after := h.deployment(d.ID)
		require.Equal(t, "active", after.State)
		require.Equal(t, b.ID, after.LastBuild.ID, "the nodes came back without a new build")
		require.Equal(t, addr, after.Nodes["miniflux-web"]["http"])
		next := h.nodePID("delta", "miniflux-web")
		require.NotEqual(t, node, next, "the node was restarted, not left running")
		node, postmaster = next, h.postmasterPID()
	}
}

// answers reports whether Miniflux serves its sign-in page on addr.
func answers(addr string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(body), "Sign In - Miniflux")
}

// running reports whether a process with pid exists and is not a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may hold spaces.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// postmasterPID reads the pid of the managed PostgreSQL from its postmaster.pid.
func (h *host) postmasterPID() int {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dataDir, "plugins", "postgresql", "cluster", "data", "postmaster.pid"))
	require.NoError(h.t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	require.NoError(h.t, err)
	return pid
}
