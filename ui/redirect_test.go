package ui_test

import (
	"context"
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

// The CSRF token counts only from the form's body (or a script's X-CSRF-Token header):
// one in the query string, which addresses leak, is not taken.
func TestCSRFTokenIsNotTakenFromTheQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.as(t, "alice")
	res, _ := alice.postRaw(t, "/deployments/new?csrf="+url.QueryEscape(alice.csrf), url.Values{"namespace": {"alice-news"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	// Nor the log-in form's.
	res, body := b.do(t, httptest.NewRequest(http.MethodGet, "/login", nil))
	m := loginToken.FindStringSubmatch(body)
	require.NotNil(t, m)
	req := httptest.NewRequest(http.MethodPost, "/login?csrf="+m[1], strings.NewReader(url.Values{"name": {"alice"}, "password": {b.pass["alice"]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookieOf(res, "fedhost_login"))
	res, _ = b.do(t, req)
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	res, _ = alice.post(t, "/deployments/new", url.Values{"namespace": {"alice-news"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "in the body it is taken")
}

// A form larger than the UI takes is refused with a page, and a name that is not plain
// text is refused without being stored.
func TestFormsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.as(t, "alice")
	res, body := alice.post(t, "/deployments/new", url.Values{"namespace": {"big"}, "name": {strings.Repeat("x", 70<<10)}})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	require.Contains(t, body, "Shorten what you typed")
	res, body = alice.post(t, "/deployments/new", url.Values{"namespace": {"bidi"}, "name": {"\u202egnp.exe"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, "control character or a bidirectional override")
	list, err := b.st.ListDeployments(context.Background(), "")
	require.NoError(t, err)
	require.Empty(t, list)
}
