package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// offSite are next addresses that a browser, after its own normalisation (it drops
// tabs and newlines, reads a backslash as a slash) or after a decoding of their
// percent-encoding, reads as another site or as no path of this one.
var offSite = []string{
	"//evil.example/",
	"/\t/evil.example",
	"/\n/evil.example",
	"/\r/evil.example",
	"/%09/evil.example",
	"/%0a/evil.example",
	"/%0d/evil.example",
	"/\\evil.example",
	"/\\/evil.example",
	"\\\\evil.example",
	"/%5Cevil.example",
	"/%5c%5cevil.example",
	"/%2F%2Fevil.example",
	"/%2f/evil.example",
	"%2F%2Fevil.example",
	"/%252F%252Fevil.example",
	"/%25252F%25252Fevil.example",
	"/%2525252F%2525252Fevil.example",
	"\t//evil.example",
	"https://evil.example/",
	"https:/evil.example",
	"javascript:alert(1)",
	"evil.example",
	"",
	"/\u202e/moc.elpmaxe",
	"/deployments\x00",
	"/%ZZ",
	"/" + strings.Repeat("a", 3000),
}

// onSite are next addresses of this site, which a log-in returns to as they are.
var onSite = []string{
	"/deployments/new",
	"/deployments/abc?x=1",
	"/deployments/abc/backups/miniflux?after=2026-01-01T00%3A00%3A00Z",
	"/account",
}

// A log-in returns to its next address only when that is a path of this site.
func TestLoginReturnsOnlyToThisSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := &client{b: b}
	check := func(t *testing.T, next, want string) {
		t.Helper()
		res, body := b.do(t, httptest.NewRequest(http.MethodGet, "/login?next="+url.QueryEscape(next), nil))
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.NotContains(t, body, "evil.example", "the log-in form does not carry %q", next)
		res, _ = anon.login(t, url.Values{"name": {"alice"}, "password": {b.pass["alice"]}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, want, res.Header.Get("Location"), "next %q", next)
	}
	for _, next := range offSite {
		check(t, next, "/deployments")
	}
	for _, next := range onSite {
		check(t, next, next)
	}
}

// Single sign-on keeps its return address in its flow cookie: the same rule holds.
func TestOIDCLoginReturnsOnlyToThisSite(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t)
	for _, next := range offSite {
		as(b.p, "alice")
		res, _ := b.do(t, b.begin(t, next))
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, "/deployments", res.Header.Get("Location"), "next %q", next)
	}
	as(b.p, "alice")
	res, _ := b.do(t, b.begin(t, "/deployments/abc?x=1"))
	require.Equal(t, "/deployments/abc?x=1", res.Header.Get("Location"))
}
