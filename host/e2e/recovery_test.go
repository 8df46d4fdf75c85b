package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A host killed in the middle of a build comes back with that build failed, and a new
// submit continues from what exists.
func TestHostKilledMidBuild(t *testing.T) {
	h := startHost(t)
	d := h.create("gamma")
	b := h.submit(d.ID, minifluxConfig("gamma.example.org", nil))
	require.Eventually(t, func() bool {
		var got build
		h.call("GET", "/builds/"+b.ID, nil, &got)
		for _, e := range got.Events {
			if strings.HasPrefix(e.Message, "creating gamma") || strings.HasPrefix(e.Message, "creating miniflux") {
				return true
			}
		}
		return false
	}, time.Minute, 5*time.Millisecond, "the build never started provisioning")
	h.kill()

	h.start()
	lost := h.wait(b.ID)
	require.Equal(t, "failed", lost.State)
	require.Contains(t, lost.Reason, "lost")
	require.Equal(t, "failed", h.deployment(d.ID).State)

	again := h.submit(d.ID, minifluxConfig("gamma.example.org", nil))
	done := h.wait(again.ID)
	require.Equal(t, "succeeded", done.State, "%+v", done)
	addr := h.deployment(d.ID).Nodes["miniflux-web"]["http"]
	require.Contains(t, signInPage(t, addr), "Sign In - Miniflux")
}

// Mastodon needs OCI images; the local provider runs binaries only, so the build fails
// before any resource is made.
func TestMastodonOnLocalFailsBeforeAnyResource(t *testing.T) {
	h := startHost(t)
	d := h.create("delta")
	var b build
	code := h.call("POST", "/deployments/"+d.ID+"/submit", map[string]any{
		"domain": "delta.example.org",
		"apps":   map[string]any{"mastodon": map[string]any{"enable": true}},
	}, &b)
	require.Equal(t, http.StatusAccepted, code)
	failed := h.wait(b.ID)
	require.Equal(t, "failed", failed.State)
	require.Contains(t, failed.Reason, "OCI")
	got := h.deployment(d.ID)
	require.Empty(t, got.Resources, "nothing was provisioned")
	for _, e := range failed.Events {
		require.False(t, strings.HasPrefix(e.Message, "creating "), "a resource was created: %s", e.Message)
	}
}
