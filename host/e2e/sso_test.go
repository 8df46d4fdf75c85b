package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ssoBrowser is a person's browser at the embedded default's front door: every name goes
// to Caddy on loopback, the host's localca root is trusted, cookies are kept.
func ssoBrowser(t *testing.T, h *host) *http.Client {
	t.Helper()
	rootPEM, err := os.ReadFile(filepath.Join(h.dataDir, "plugins", "localca", "ca.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(rootPEM))
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(h.httpsPort)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

var (
	formAction  = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
	hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// signInThrough starts Miniflux's OpenID sign-in, fills the provider's log-in page and
// returns the last answer, after the redirects, and its URL.
func signInThrough(t *testing.T, c *http.Client, app, user, password string) (int, string, *url.URL) {
	t.Helper()
	resp, err := c.Get(app + "oauth2/oidc/redirect")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
	require.True(t, strings.HasPrefix(resp.Request.URL.Host, "auth."), "Miniflux sends the browser to the deployment's provider, not %s", resp.Request.URL)
	m := formAction.FindSubmatch(page)
	require.NotNil(t, m, "the provider's log-in page has its form: %s", page)
	action, err := resp.Request.URL.Parse(html.UnescapeString(string(m[1])))
	require.NoError(t, err)
	form := url.Values{"username": {user}, "password": {password}}
	for _, h := range hiddenInput.FindAllSubmatch(page, -1) {
		form.Set(string(h[1]), html.UnescapeString(string(h[2])))
	}
	resp, err = c.PostForm(action.String(), form)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), resp.Request.URL
}

type minifluxUser struct {
	Username string `json:"username"`
	IsAdmin  bool   `json:"is_admin"`
}

func minifluxUsers(t *testing.T, addr, password string) map[string]minifluxUser {
	code, body := minifluxAPI(t, addr, "admin", password, "GET", "/v1/users", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var list []minifluxUser
	require.NoError(t, json.Unmarshal(body, &list))
	out := map[string]minifluxUser{}
	for _, u := range list {
		out[u.Username] = u
	}
	return out
}

// Miniflux signs people in through the deployment's own OpenID provider on the embedded
// default (a managed slapd, the builtin provider at auth.<domain> behind Caddy, localca
// certificates): a user the operator added to miniflux-users signs in and Miniflux makes
// her account; one in no allowed group is refused at the provider, naming the app; the
// admin group makes her a Miniflux admin at her next sign-in; a disabled user cannot
// sign in again.
func TestMinifluxSignsInThroughTheDeploymentsProvider(t *testing.T) {
	h := startHost(t)
	d := h.create("sso")
	b := h.submit(d.ID, minifluxConfig("sso.localhost", map[string]any{"oidc": map[string]any{"enable": true}}))
	done := h.wait(b.ID)
	require.Equal(t, "succeeded", done.State, "%+v\n%s", done, h.log.String())
	app := fmt.Sprintf("https://feeds.sso.localhost:%d/", h.httpsPort)
	addr := h.deployment(d.ID).Nodes["miniflux-web"]["http"]
	admin := h.nodeFile("sso", "miniflux-web", "admin-password")

	// The operator adds alice to miniflux-users and bob to no group; each sets a
	// password with the invitation link.
	invite := func(name string, groups []string) string {
		var answer struct {
			Link struct {
				URL string `json:"url"`
			} `json:"link"`
		}
		code := h.call("POST", "/deployments/"+d.ID+"/users", map[string]any{"name": name, "groups": groups}, &answer)
		require.Equal(t, http.StatusCreated, code)
		_, token, ok := strings.Cut(answer.Link.URL, "#")
		require.True(t, ok, "the link's token is its fragment: %q", answer.Link.URL)
		password := name + "-Pw-4e9c1a7b"
		require.Equal(t, http.StatusNoContent, h.call("POST", "/password-links/use", map[string]string{"token": token, "password": password}, nil))
		return password
	}
	alicePw := invite("alice", []string{"miniflux-users"})
	bobPw := invite("bob", []string{})

	code, page, at := signInThrough(t, ssoBrowser(t, h), app, "alice", alicePw)
	require.Equal(t, http.StatusOK, code, "%s", page)
	require.Equal(t, "feeds.sso.localhost:"+strconv.Itoa(h.httpsPort), at.Host, "back at Miniflux, signed in: %s", page)
	require.NotContains(t, page, "<title>Sign In - Miniflux</title>")
	users := minifluxUsers(t, addr, admin)
	require.Contains(t, users, "alice", "Miniflux made her account at her first sign-in")
	require.False(t, users["alice"].IsAdmin)

	code, page, at = signInThrough(t, ssoBrowser(t, h), app, "bob", bobPw)
	require.Equal(t, http.StatusForbidden, code)
	require.True(t, strings.HasPrefix(at.Host, "auth."), "bob stays at the provider")
	require.Contains(t, page, "Miniflux", "the refusal names the app")
	require.NotContains(t, minifluxUsers(t, addr, admin), "bob")

	// In miniflux-admins, alice is an admin from her next sign-in.
	require.Equal(t, http.StatusOK, h.call("PUT", "/deployments/"+d.ID+"/users/alice/groups/miniflux-admins", nil, nil))
	code, page, _ = signInThrough(t, ssoBrowser(t, h), app, "alice", alicePw)
	require.Equal(t, http.StatusOK, code, "%s", page)
	require.True(t, minifluxUsers(t, addr, admin)["alice"].IsAdmin, "the groups claim made her an admin")

	// Disabled, she cannot sign in again.
	require.Equal(t, http.StatusOK, h.call("POST", "/deployments/"+d.ID+"/users/alice/disable", nil, nil))
	code, page, at = signInThrough(t, ssoBrowser(t, h), app, "alice", alicePw)
	require.True(t, strings.HasPrefix(at.Host, "auth."), "a disabled user stays at the provider (%d): %s", code, page)
	require.Contains(t, page, "The user name or the password is wrong.")

	// The web addresses list the sign-in with its certificate.
	out := h.cli("deployments", "status", d.ID)
	require.Regexp(t, `url\s+sign-in\s+https://auth\.sso\.localhost:`+strconv.Itoa(h.httpsPort)+`/ \(live\)`, out)
	require.Regexp(t, `certificate\s+sign-in\s+valid`, out)
}
