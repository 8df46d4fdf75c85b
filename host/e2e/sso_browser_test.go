package e2e

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// servedKeys are the SPKI digests of the certificates the front door serves for names,
// verified against the host's localca root: Chromium takes an exception only for a key
// of a certificate the server presents.
func servedKeys(t *testing.T, h *host, names ...string) []string {
	t.Helper()
	rootPEM, err := os.ReadFile(filepath.Join(h.dataDir, "plugins", "localca", "ca.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(rootPEM))
	var keys []string
	for _, name := range names {
		conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(h.httpsPort), &tls.Config{ServerName: name, RootCAs: pool})
		require.NoError(t, err, "the front door serves %s with a certificate of the host's localca", name)
		for _, c := range conn.ConnectionState().PeerCertificates {
			spki := sha256.Sum256(c.RawSubjectPublicKeyInfo)
			keys = append(keys, base64.StdEncoding.EncodeToString(spki[:]))
		}
		conn.Close()
	}
	return keys
}

// person is another visitor in the same Chromium: a browser context of its own, with
// its own cookies; its screenshots follow from number first on.
func (b *browser) person(first int) *browser {
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	p := &browser{t: b.t, ctx: ctx, base: b.base, dir: b.dir, shot: first}
	require.NoError(b.t, chromedp.Do(ctx), "a new browser context")
	return p
}

// signInToMiniflux opens Miniflux, chooses its OpenID sign-in, and signs in at the
// provider's page, and waits for the page where that ends.
func (b *browser) signInToMiniflux(app, who, user, password string) {
	t := b.t
	t.Helper()
	resp, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(app))
	require.NoError(t, err, "opening %s", app)
	require.Equal(t, int64(200), resp.Status)
	title, _ := chromedp.Run(b.ctx, chromedp.Title())
	require.Equal(t, "Sign In - Miniflux", title)
	b.screenshot(who + "-miniflux-sign-in")
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`div.oauth2 a[href*="/oauth2/oidc/redirect"]`))))
	at, err := url.Parse(b.location())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(at.Host, "auth."), "Miniflux sends the browser to the deployment's provider, not %s", at)
	title, _ = chromedp.Run(b.ctx, chromedp.Title())
	require.Equal(t, "Sign in to Miniflux", title)
	b.do(typeInto("username", user)...)
	b.do(typeInto("password", password)...)
	b.screenshot(who + "-provider-sign-in")
	// The answer is a chain of redirects (provider, Miniflux's callback, its first page)
	// that Chromium reports as an aborted load: the test waits for where it ends instead,
	// back at Miniflux or on a provider's page with a message.
	b.do(chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)))
	deadline := time.Now().Add(30 * time.Second)
	for {
		ended, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && (location.host.startsWith("feeds.") || document.querySelector("main p.error") !== null)`))
		if err == nil && ended {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sign-in of %s ends nowhere: on %s (%v)", user, b.location(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAdmin polls Miniflux's API until alice's is_admin is want.
func waitAdmin(t *testing.T, addr, admin, user string, want bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		u, ok := minifluxUsers(t, addr, admin)[user]
		require.True(t, ok, "Miniflux has a user %s", user)
		if u.IsAdmin == want {
			return time.Since(start)
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("after %s, Miniflux's API says %s's is_admin is %v, not %v: the role sync did not run", time.Since(start).Round(time.Second), user, u.IsAdmin, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestBrowserSignsInToMinifluxThroughTheProvider walks the single sign-on in headless
// Chromium through the front door: the operator puts alice in miniflux-users on the
// fedhost UI's users page; alice opens Miniflux, chooses the OpenID sign-in, signs in at
// auth.<domain> and is in Miniflux; bob, in no group, is refused at the provider by a
// page that names the app and the groups; the operator puts alice in miniflux-admins and
// the role sync, not a new sign-in, makes her a Miniflux admin (Miniflux's API says so);
// disabled, she is no admin any more and cannot sign in again.
func TestBrowserSignsInToMinifluxThroughTheProvider(t *testing.T) {
	h := startHost(t)
	d := h.create("sso")
	done := h.wait(h.submit(d.ID, minifluxConfig("sso.localhost", map[string]any{"oidc": map[string]any{"enable": true}})).ID)
	require.Equal(t, "succeeded", done.State, "%+v\n%s", done, h.log.String())
	app := fmt.Sprintf("https://feeds.sso.localhost:%d/", h.httpsPort)
	addr := h.deployment(d.ID).Nodes["miniflux-web"]["http"]
	admin := h.nodeFile("sso", "miniflux-web", "admin-password")

	// alice and bob are users in no group yet, each with a password set by the link.
	invite := func(name string) string {
		var answer struct {
			Link struct {
				URL string `json:"url"`
			} `json:"link"`
		}
		require.Equal(t, http.StatusCreated, h.call("POST", "/deployments/"+d.ID+"/users", map[string]any{"name": name, "groups": []string{}}, &answer))
		_, token, ok := strings.Cut(answer.Link.URL, "#")
		require.True(t, ok, "the link's token is its fragment")
		password := name + "-Pw-77c1e2d0"
		require.Equal(t, http.StatusNoContent, h.call("POST", "/password-links/use", map[string]string{"token": token, "password": password}, nil))
		return password
	}
	alicePw, bobPw := invite("alice"), invite("bob")

	op := newBrowser(t, h,
		chromedp.Flag("host-resolver-rules", "MAP *.sso.localhost 127.0.0.1"),
		chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(servedKeys(t, h, "feeds.sso.localhost", "auth.sso.localhost"), ",")),
	)
	op.signIn(h)
	usersPage := "/deployments/" + d.ID + "/users"
	addTo := func(group string) {
		t.Helper()
		require.Equal(t, 200, op.open(usersPage))
		op.do(chromedp.SetValue(chromedp.CSS(`#group-alice`), group))
		require.Equal(t, 200, op.load(chromedp.Click(chromedp.CSS(`form.inline[action="`+usersPage+`/alice/groups"] button[type="submit"]`))))
		require.Equal(t, usersPage, op.path())
		groups, err := chromedp.Run(op.ctx, chromedp.Evaluate[string](`document.querySelector("#user-alice ul.groups").textContent`))
		require.NoError(t, err)
		require.Contains(t, groups, group, "the users page lists alice in %s", group)
	}
	addTo("miniflux-users")
	op.screenshot("alice-in-miniflux-users")

	alice := op.person(20)
	alice.signInToMiniflux(app, "alice", "alice", alicePw)
	at, err := url.Parse(alice.location())
	require.NoError(t, err)
	require.Equal(t, "feeds.sso.localhost:"+strconv.Itoa(h.httpsPort), at.Host, "back at Miniflux")
	_, err = chromedp.Run(alice.ctx, chromedp.Poll[bool](`document.querySelector("form.logout-form button[title]") !== null`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "Miniflux shows alice logged in (its log-out button) on %s", at)
	who, err := chromedp.Run(alice.ctx, chromedp.Evaluate[string](`document.querySelector("form.logout-form button").getAttribute("title")`))
	require.NoError(t, err)
	require.Contains(t, who, "alice", "the log-out button names the user logged in")
	alice.screenshot("alice-in-miniflux")
	require.False(t, minifluxUsers(t, addr, admin)["alice"].IsAdmin)

	bob := op.person(40)
	bob.signInToMiniflux(app, "bob", "bob", bobPw)
	at, err = url.Parse(bob.location())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(at.Host, "auth."), "bob stays at the provider")
	refusal, err := chromedp.Run(bob.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	require.NoError(t, err)
	require.Contains(t, refusal, "Not admitted to Miniflux")
	require.Contains(t, refusal, "admits only members of")
	require.Contains(t, refusal, "miniflux-users")
	require.Contains(t, refusal, "you are in none of them")
	bob.screenshot("bob-refused")
	require.NotContains(t, minifluxUsers(t, addr, admin), "bob")

	// In miniflux-admins, alice is an admin without signing in again: the role sync.
	addTo("miniflux-admins")
	op.screenshot("alice-in-miniflux-admins")
	t.Logf("alice an admin %s after the operator's change", waitAdmin(t, addr, admin, "alice", true).Round(time.Millisecond))

	// Disabled, she is no admin any more and cannot sign in again.
	require.Equal(t, 200, op.open(usersPage))
	require.Equal(t, 200, op.load(chromedp.Click(chromedp.CSS(`form[action="`+usersPage+`/alice/disable"] button[type="submit"]`))))
	state, err := chromedp.Run(op.ctx, chromedp.Evaluate[string](`document.querySelector("#user-alice .state").textContent`))
	require.NoError(t, err)
	require.Equal(t, "disabled", strings.TrimSpace(state))
	op.screenshot("alice-disabled")
	waitAdmin(t, addr, admin, "alice", false)
	again := op.person(60)
	again.signInToMiniflux(app, "alice-disabled", "alice", alicePw)
	at, err = url.Parse(again.location())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(at.Host, "auth."), "a disabled user stays at the provider")
	text, err := chromedp.Run(again.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	require.NoError(t, err)
	require.Contains(t, text, "The user name or the password is wrong.")
	again.screenshot("alice-disabled-refused")
}
