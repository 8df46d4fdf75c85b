package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// helloDirs makes a plugin dir and an artifacts dir beside it, as docs/plugins.md tells
// an author to: the plugins of the embedded default, the hello plugin and its server.
func helloDirs(t testing.TB) (pluginDir string) {
	return pluginDirs(t, map[string]string{
		"plugins/fedhost-app-hello": "./examples/hello", "artifacts/hello-server": "./examples/hello/cmd/hello-server"})
}

// pluginDirs makes a plugin dir and an artifacts dir beside it with the plugins and
// artifacts of the embedded default, built from this tree, and the programs of builds
// (an output path under the dir, such as plugins/fedhost-app-x, to the package built
// there, relative to the repository), and a plugins.lock of them all.
func pluginDirs(t testing.TB, builds map[string]string) (pluginDir string) {
	dir := t.TempDir()
	pluginDir, artifacts := filepath.Join(dir, "plugins"), filepath.Join(dir, "artifacts")
	for src, dst := range map[string]string{filepath.Join(binDir, "plugins"): pluginDir, filepath.Join(binDir, "artifacts"): artifacts} {
		require.NoError(t, os.MkdirAll(dst, 0o755))
		entries, err := os.ReadDir(src)
		require.NoError(t, err)
		for _, e := range entries {
			if e.Name() != "plugins.lock" {
				require.NoError(t, os.Link(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())))
			}
		}
	}
	for out, pkg := range builds {
		// Built in its own folder, so that a package of another module (examples/hello) is
		// built with that module.
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), ".")
		cmd.Dir = filepath.Join("../..", pkg)
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, b)
	}
	cmd := exec.Command(filepath.Join(binDir, "fedhost"), "plugins", "lock")
	cmd.Env = append(os.Environ(), "FEDHOST_PLUGIN_DIR="+pluginDir)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "plugins lock: %s", b)
	return pluginDir
}

// storedOptions returns the stored options of app in a deployment's configuration.
func storedOptions(t *testing.T, config json.RawMessage, app string) json.RawMessage {
	t.Helper()
	var c struct {
		Apps map[string]struct {
			Options json.RawMessage `json:"options"`
		} `json:"apps"`
	}
	require.NoError(t, json.Unmarshal(config, &c))
	return c.Apps[app].Options
}

func visit(t *testing.T, c *http.Client, addr string) string {
	t.Helper()
	resp, err := c.Get("http://" + addr + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return string(body)
}

// The example app deploys on the embedded default: its node runs the server it builds,
// from the artifacts dir, with its own database, a generated key, the settings of its
// app block in fedhost.hcl, and the schema's defaults when sent no options.
func TestHelloOnTheEmbeddedDefault(t *testing.T) {
	hcl := filepath.Join(t.TempDir(), "fedhost.hcl")
	require.NoError(t, os.WriteFile(hcl, []byte("app \"hello\" {\n  settings = { footer = \"Hosted by Example\" }\n}\n"), 0o600))
	h := startHost(t, "FEDHOST_PLUGIN_DIR="+helloDirs(t), "FEDHOST_CONFIG="+hcl)
	d := h.create("acme")
	b := h.submit(d.ID, map[string]any{"domain": "acme.example.org", "apps": map[string]any{
		"hello": map[string]any{"enable": true, "options": map[string]any{"greeting": "Hello from acme", "theme": "dark"}}}})
	require.Equal(t, "succeeded", h.wait(b.ID).State, "build log:\n%s", h.log)
	addr := h.deployment(d.ID).Nodes["hello-web"]["http"]
	require.NotEmpty(t, addr)

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	first := &http.Client{Jar: jar}
	page := visit(t, first, addr)
	require.Contains(t, page, "<h1>Hello from acme</h1>")
	require.Contains(t, page, "visited 1 times by 1 visitors. You came 1 times.")
	require.Contains(t, page, "<footer>Hosted by Example</footer>", "the app block's settings reached the plugin")
	require.Contains(t, visit(t, first, addr), "visited 2 times by 1 visitors. You came 2 times.")
	require.Contains(t, visit(t, &http.Client{}, addr), "visited 3 times by 2 visitors. You came 1 times.",
		"a visitor without the signed cookie is a new one, and the count is in the database")

	// Sent without options, hello gets its schema's defaults, stored with the configuration.
	beta := h.create("beta")
	bb := h.submit(beta.ID, map[string]any{"domain": "beta.example.org", "apps": map[string]any{"hello": map[string]any{"enable": true}}})
	require.Equal(t, "succeeded", h.wait(bb.ID).State)
	require.Contains(t, visit(t, &http.Client{}, h.deployment(beta.ID).Nodes["hello-web"]["http"]), "<h1>Hello, world</h1>")
	require.JSONEq(t, `{"greeting": "Hello, world", "theme": "light"}`, string(storedOptions(t, h.deployment(beta.ID).Config, "hello")))

	// The generated key reached the node as a file, not through its spec.
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), h.nodeFile("acme", "hello-web", "cookie-key"))
}
