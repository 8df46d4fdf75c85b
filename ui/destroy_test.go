package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
)

// A destroy deletes every app's data: it is queued only when the operator typed the
// deployment's namespace, and the page says what goes and what stays.
func TestDestroyNeedsTheNamespaceTyped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withQueue(t, b)
	d := b.create(t, "alice", "alice-news")
	activate(t, b, d)
	withData(t, b, d, "miniflux")
	require.NoError(t, b.st.PutResource(context.Background(), store.Resource{DeploymentID: d.ID, Name: "miniflux-backups-restic", App: "miniflux",
		Type: "secret", State: store.ResourceProvisioned, Spec: "{}", Result: "{}"}))
	alice := b.as(t, "alice")
	path := "/deployments/" + d.ID + "/destroy"

	_, body := alice.get(t, "/deployments/"+d.ID)
	require.Contains(t, body, `<a class="button danger" href="`+path+`">Destroy…</a>`, "the deployment page leads to the confirmation")

	res, body := alice.get(t, path)
	require.Equal(t, http.StatusOK, res.StatusCode)
	removed, kept := section(t, body, "Removed"), section(t, body, "Kept for 30 days")
	require.Contains(t, removed, "<code>miniflux-db</code>")
	require.NotContains(t, removed, "miniflux-backups")
	require.Contains(t, kept, "<code>miniflux-backups</code>")
	require.Contains(t, kept, "<code>miniflux-backups-restic</code>")
	require.Contains(t, body, `name="confirm" value="" required`)
	requireLabelled(t, body)

	for _, typed := range []string{"", "alice", "ALICE-NEWS"} {
		res, body = alice.post(t, path, url.Values{"confirm": {typed}})
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "%q", typed)
		require.Contains(t, body, "nothing was destroyed")
		require.Contains(t, body, `aria-invalid="true"`)
	}
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "deployment.destroy", Result: string(audit.ResultInvalid), Actor: b.users["alice"].ID, DeploymentID: d.ID}))
	res, _ = alice.postRaw(t, path, url.Values{"confirm": {d.Namespace}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "no CSRF token")
	res, _ = b.as(t, "bob").post(t, path, url.Values{"confirm": {d.Namespace}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "another operator")
	require.Empty(t, builds(t, b, d), "nothing is destroyed without the namespace")

	res, _ = alice.post(t, path, url.Values{"confirm": {d.Namespace}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	list := builds(t, b, d)
	require.Len(t, list, 1)
	require.Equal(t, store.OperationDestroy, list[0].Operation)
	require.Equal(t, "/builds/"+list[0].ID, res.Header.Get("Location"))
}

// section returns the part of page from the heading <h2>title</h2> to the next heading or
// form.
func section(t *testing.T, page, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, "<h2>"+title+"</h2>")
	require.True(t, ok, "no section %q", title)
	for _, end := range []string{"<h2>", "<form"} {
		if j := strings.Index(rest, end); j >= 0 {
			rest = rest[:j]
		}
	}
	return rest
}
