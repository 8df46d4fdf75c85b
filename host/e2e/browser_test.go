package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// browser is one headless Chromium tab on a host, saving its screenshots into dir.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string
	shot int

	mu       sync.Mutex
	problems []string // uncaught exceptions and console errors of the pages
}

// newBrowser starts headless Chromium for h's UI; extra adds flags.
func newBrowser(t *testing.T, h *host, extra ...chromedp.ExecAllocatorOption) *browser {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium on PATH (%v): the browser test drives headless Chromium; install the Debian package: apt-get install chromium", err)
	}
	dir := os.Getenv("FEDHOST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	ctx, cancelTime := context.WithTimeout(ctx, 8*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: "http://" + h.addr, dir: dir}
	require.NoError(t, chromedp.Do(ctx), "starting %s", exe)

	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	entries := chromedp.Events(ctx, log.EntryAdded)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil {
				text += " " + d.Exception.Description
			}
			b.problem("exception at %s:%d: %s", d.URL, d.LineNumber, text)
		}
	}()
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			if e := ev.Entry; e.Level == log.EntryLevelError || e.Level == log.EntryLevelWarning {
				b.problem("console %s (%s) %s: %s", e.Level, e.Source, e.URL, e.Text)
			}
		}
	}()
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Logf("page said: %s", p)
		}
	})
	return b
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// do runs steps that return nothing.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, steps...), "on %s", b.location())
}

// load runs steps that load a page (a click on a link or a submit button) and returns
// the status of the page they end on.
func (b *browser) load(steps ...chromedp.Action[chromedp.Void]) int {
	b.t.Helper()
	resp, err := chromedp.RunResponse(b.ctx, steps...)
	require.NoError(b.t, err, "on %s", b.location())
	return int(resp.Status)
}

func (b *browser) open(path string) int {
	b.t.Helper()
	resp, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(b.base+path))
	require.NoError(b.t, err, "opening %s", path)
	return int(resp.Status)
}

func (b *browser) location() string {
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		return "an unknown page (" + err.Error() + ")"
	}
	return loc
}

// path is the path of the page the tab shows.
func (b *browser) path() string {
	b.t.Helper()
	u, err := url.Parse(b.location())
	require.NoError(b.t, err)
	return u.Path
}

// screenshot saves the whole page as NN-name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	b.shot++
	file := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.shot, name))
	require.NoError(b.t, os.WriteFile(file, png, 0o644))
}

// fieldError is what the page says about one field of a form.
type fieldError struct {
	Invalid string `json:"invalid"` // the control's aria-invalid
	Message string `json:"message"` // the text of the .field-error the control points at
	Beside  bool   `json:"beside"`  // the error sits in the same .field as the control
}

// errorOf finds the control named name and the .field-error its aria-describedby names.
func (b *browser) errorOf(name string) fieldError {
	b.t.Helper()
	fe, err := chromedp.Run(b.ctx, chromedp.Evaluate[fieldError](fmt.Sprintf(`(() => {
		const input = document.querySelector('input[name=%[1]q]:not([type=hidden])');
		if (!input) return {invalid: "no input named " + %[1]q, message: "", beside: false};
		const ids = (input.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
		const err = ids.map(id => document.getElementById(id)).find(el => el && el.classList.contains("field-error"));
		const field = input.closest(".field");
		return {
			invalid: input.getAttribute("aria-invalid") || "",
			message: err ? err.textContent.trim() : "",
			beside: !!(err && field && field.contains(err)),
		};
	})()`, name)))
	require.NoError(b.t, err)
	return fe
}

// clickDeploy presses the configuration form's Deploy button with the browser's own
// validation off, so that what the page shows afterwards is the server's judgement.
func (b *browser) clickDeploy() int {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('button[name="action"][value="deploy"]').form.noValidate = true`))
	return b.load(chromedp.Click(chromedp.CSS(`button[name="action"][value="deploy"]`)))
}

// typeInto replaces the text of the visible input named name by typing value.
func typeInto(name, value string) []chromedp.Action[chromedp.Void] {
	css := fmt.Sprintf(`input[name=%q]:not([type=hidden])`, name)
	// chromedp's SetValue refuses an empty value, so the field is emptied by a script.
	clear := chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, css))
	return []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS(css)), clear, chromedp.SendKeys(chromedp.CSS(css), value)}
}

// TestBrowserDeploysMiniflux walks an operator through the UI in a real browser: log in,
// create a deployment, configure Miniflux, see the server refuse a wrong value next to
// its field, deploy, follow the build to its end and open the running Miniflux.
func TestBrowserDeploysMiniflux(t *testing.T) {
	h := startHost(t)
	b := newBrowser(t, h)
	b.signIn(h)
	b.screenshot("deployments")

	// Create a deployment through the link on the list.
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`a[href="/deployments/new"]`))))
	b.do(typeInto("namespace", "browser")...)
	b.screenshot("new-deployment")
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`form[action="/deployments/new"] button[type="submit"]`))))
	deploymentPath := b.path()
	require.Regexp(t, `^/deployments/[^/]+$`, deploymentPath, "creating a deployment opens it")
	id := strings.TrimPrefix(deploymentPath, "/deployments/")

	// Configure Miniflux with a polling frequency below its minimum.
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`a[href="/deployments/`+id+`/configure"]`))))
	enable := chromedp.CSS(`input[type="checkbox"][name="/apps/miniflux/enable"]`)
	b.do(chromedp.WaitVisible(enable), chromedp.Click(enable))
	on, err := chromedp.Run(b.ctx, chromedp.JavascriptAttribute[bool](enable, "checked"))
	require.NoError(t, err)
	require.True(t, on, "clicking the Miniflux switch turns it on")
	b.do(typeInto("/domain", "browser.example.org")...)
	b.do(typeInto("/apps/miniflux/options/pollingFrequency", "1")...)
	b.screenshot("configure")
	require.Equal(t, 400, b.clickDeploy(), "the server refuses a polling frequency of 1")
	require.Equal(t, "/deployments/"+id+"/configure", b.path())
	b.screenshot("invalid")
	refusal := b.errorOf("/apps/miniflux/options/pollingFrequency")
	require.Equal(t, "true", refusal.Invalid, "the field is marked invalid")
	require.NotEmpty(t, refusal.Message, "the field points at the server's error through aria-describedby")
	require.True(t, refusal.Beside, "the error is shown next to its field")
	require.NotContains(t, refusal.Message, "undefined")
	domain, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS(`input[name="/domain"]`)))
	require.NoError(t, err)
	require.Equal(t, "browser.example.org", domain, "the refused form keeps what was typed")

	// Correct it and deploy: the build page follows the build to its end.
	b.do(typeInto("/apps/miniflux/options/pollingFrequency", "15")...)
	require.Equal(t, 200, b.clickDeploy())
	require.Regexp(t, `^/builds/[^/]+$`, b.path(), "a deploy opens its build")
	_, err = chromedp.Run(b.ctx, chromedp.Poll[bool](`document.getElementById("progress").value > 0 || document.getElementById("build-state").textContent.trim() !== "queued"`,
		chromedp.WithPollingTimeout(time.Minute)))
	require.NoError(t, err, "the build page shows no progress")
	b.screenshot("progress")
	_, err = chromedp.Run(b.ctx, chromedp.Poll[bool](`["succeeded", "failed", "canceled"].includes(document.getElementById("build-state").textContent.trim())`,
		chromedp.WithPollingTimeout(4*time.Minute), chromedp.WithPollingInterval(200*time.Millisecond)))
	require.NoError(t, err, "the build page did not show the end of the build")
	state, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.ID("build-state")))
	require.NoError(t, err)
	b.screenshot("success")
	require.Equal(t, "succeeded", strings.TrimSpace(state), "log:\n%s", h.log)
	progress, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](`document.getElementById("progress").value`))
	require.NoError(t, err)
	require.Equal(t, 100.0, progress)

	// The deployment page links to the node, and the node is Miniflux.
	require.Equal(t, 200, b.open(deploymentPath))
	b.screenshot("deployment")
	// On a phone's width the page does not scroll sideways: wide tables scroll in place.
	b.do(chromedp.EmulateViewport(400, 800))
	require.Equal(t, 200, b.open(deploymentPath))
	width, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	require.NoError(t, err)
	require.LessOrEqual(t, width, 400, "the deployment page is wider than a narrow screen")
	b.screenshot("deployment-narrow")
	b.do(chromedp.EmulateViewport(1280, 900))
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`a.node-address`))))
	_, err = chromedp.Run(b.ctx, chromedp.Poll[bool](`document.title === "Sign In - Miniflux"`, chromedp.WithPollingTimeout(30*time.Second)))
	title, _ := chromedp.Run(b.ctx, chromedp.Title())
	require.NoError(t, err, "the node address shows %q, not Miniflux's sign-in page", title)
	b.screenshot("miniflux")
}

// signIn logs in as the first superuser with the password the first start printed, and
// changes it, as the first sign-in must; it ends on the deployments page.
func (b *browser) signIn(h *host) {
	t := b.t
	t.Helper()
	m := firstPassword.FindStringSubmatch(h.log.String())
	require.NotNil(t, m, "the first start printed no password:\n%s", h.log)
	require.Equal(t, 200, b.open("/login"), "the login page; is the UI mounted in fedhost serve?")
	b.screenshot("login")
	b.do(typeInto("name", "admin")...)
	b.do(typeInto("password", m[1])...)
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`form button[type="submit"]`))))
	require.Equal(t, "/account/password", b.path(), "the first start's password is changed first")
	b.screenshot("change-password")
	b.do(typeInto("current_password", m[1])...)
	b.do(typeInto("new_password", "the browser test's passphrase")...)
	b.do(typeInto("confirm_password", "the browser test's passphrase")...)
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`form[action="/account/password"] button[type="submit"]`))))
	require.Equal(t, "/account", b.path(), "the change lands on the account page")
	require.Equal(t, 200, b.load(chromedp.Click(chromedp.CSS(`nav a[href="/deployments"]`))))
	require.Equal(t, "/deployments", b.path())
}

// TestBrowserFormOfAnySchema deploys an app whose schema has every feature the form
// supports: untouched, the defaults alone make a valid configuration, which is stored
// with them; three bad values at once give three errors, each at its input.
func TestBrowserFormOfAnySchema(t *testing.T) {
	pluginDir := pluginDirs(t, map[string]string{"plugins/fedhost-app-formapp": "./ui/form/testdata/formapp"})
	h := startHost(t, "FEDHOST_PLUGIN_DIR="+pluginDir)
	b := newBrowser(t, h)
	b.signIn(h)
	d := h.create("forms")

	require.Equal(t, 200, b.open("/deployments/"+d.ID+"/configure"))
	// Before any deploy, the page says which apps the embedded default cannot run.
	unrunnable, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.ID("unrunnable")))
	require.NoError(t, err, "the configure page does not warn of the apps this host cannot run")
	require.Contains(t, unrunnable, "mastodon cannot run on this host: instance provider local refuses its node")
	require.NotContains(t, unrunnable, "formapp")
	enable := chromedp.CSS(`input[type="checkbox"][name="/apps/formapp/enable"]`)
	b.do(chromedp.WaitVisible(enable), chromedp.Click(enable))
	b.do(typeInto("/domain", "forms.example.org")...)
	b.screenshot("form-untouched")
	valid, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.querySelector('button[name="action"][value="deploy"]').form.checkValidity()`))
	require.NoError(t, err)
	require.True(t, valid, "the browser's own validation would stop the untouched form")
	require.Equal(t, 200, b.clickDeploy(), "an untouched form deploys")
	require.Regexp(t, `^/builds/[^/]+$`, b.path())
	buildID := strings.TrimPrefix(b.path(), "/builds/")
	require.Equal(t, "succeeded", h.wait(buildID).State, "build log:\n%s", h.log)
	require.JSONEq(t, `{"siteName": "Our site", "contact": {"email": "admin@example.org", "team": "ops"},
		"mode": "invite", "workers": 2, "tags": ["news"]}`, string(storedOptions(t, h.deployment(d.ID).Config, "formapp")),
		"the stored configuration has the schema's defaults, and no untouched optional object")

	require.Equal(t, 200, b.open("/deployments/"+d.ID+"/configure"))
	b.do(typeInto("/apps/formapp/options/siteName", "ab")...)
	b.do(typeInto("/apps/formapp/options/workers", "99")...)
	b.do(typeInto("/apps/formapp/options/contact/email", "not-an-address")...)
	require.Equal(t, 400, b.clickDeploy(), "three bad values are refused")
	b.screenshot("form-three-errors")
	for name, want := range map[string]string{
		"/apps/formapp/options/siteName":      "Site name must be at least 3 characters",
		"/apps/formapp/options/workers":       "Workers must be at most 16",
		"/apps/formapp/options/contact/email": "Contact e-mail must be an e-mail address",
	} {
		fe := b.errorOf(name)
		require.Equal(t, "true", fe.Invalid, "%s is marked invalid", name)
		require.Equal(t, want, fe.Message, "%s", name)
		require.True(t, fe.Beside, "the error of %s is next to it", name)
	}

	// A stored secret can be cleared: through the API, a pointer with no secret is refused,
	// naming it; on the page, its "Clear the stored value" box forgets it.
	const tokenPtr = "/apps/formapp/options/apiToken"
	cfg := map[string]any{"domain": "forms.example.org", "apps": map[string]any{"formapp": map[string]any{"enable": true,
		"options": map[string]any{"apiToken": "a-token-of-the-operator"}}}}
	var refusal struct {
		Error struct{ Code, Location string } `json:"error"`
	}
	require.Equal(t, 400, h.call("POST", "/deployments/"+d.ID+"/submit?clear_secret="+url.QueryEscape(tokenPtr), cfg, &refusal))
	require.Equal(t, tokenPtr, refusal.Error.Location, "no secret is stored there yet")
	var queued build
	require.Equal(t, 202, h.call("POST", "/deployments/"+d.ID+"/submit", cfg, &queued))
	require.Equal(t, "succeeded", h.wait(queued.ID).State)
	require.Equal(t, []string{tokenPtr}, h.deployment(d.ID).SecretsSet)
	// With a secret stored, a new one typed is still held to the schema.
	short := map[string]any{"domain": "forms.example.org", "apps": map[string]any{"formapp": map[string]any{"enable": true,
		"options": map[string]any{"apiToken": "short"}}}}
	refusal.Error.Location = ""
	require.Equal(t, 400, h.call("POST", "/deployments/"+d.ID+"/submit", short, &refusal))
	require.Equal(t, tokenPtr, refusal.Error.Location, "a too short secret is refused although one is stored")
	require.Equal(t, 200, b.open("/deployments/"+d.ID+"/configure"))
	b.do(chromedp.Click(chromedp.CSS(`input[name="clear-secret"][value="` + tokenPtr + `"]`)))
	require.Equal(t, 200, b.clickDeploy())
	require.Equal(t, "succeeded", h.wait(strings.TrimPrefix(b.path(), "/builds/")).State)
	require.Empty(t, h.deployment(d.ID).SecretsSet, "the cleared secret is forgotten")
}
