package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// syncBuffer is a log that the plugin writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// node is a real Miniflux run by the local instance provider on a real PostgreSQL.
type node struct {
	rc        *resource.Client
	spec      json.RawMessage
	addr      string
	pluginLog *syncBuffer
}

func goBuild(t *testing.T, out, pkg string) {
	t.Helper()
	b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, b)
}

func startMiniflux(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	goBuild(t, filepath.Join(dir, "artifacts", binary), "miniflux.app/v2")
	goBuild(t, filepath.Join(dir, "artifacts", apiBinary), "./cmd/fedhost-miniflux-api")
	pluginBin := filepath.Join(dir, "fedhost-resource-local")
	goBuild(t, pluginBin, "../../resources/local")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := &syncBuffer{}
	p, err := client.Start(ctx, pluginBin, client.WithLogger(hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Debug})),
		client.WithEnv(sdk.DataDirEnv+"="+filepath.Join(dir, "data")))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, json.RawMessage(fmt.Sprintf(`{"artifacts_dir": %q}`, filepath.Join(dir, "artifacts")))))
	rc := p.Resource()

	dsn, err := url.Parse(pgtest.DSN(t))
	require.NoError(t, err)
	port, _ := strconv.Atoi(dsn.Port())
	dbPassword, _ := dsn.User.Password()
	results := map[string]json.RawMessage{}
	for name, v := range map[string]any{
		requestDB: contract.PostgreSQLResult{Host: dsn.Hostname(), Port: port, Database: strings.TrimPrefix(dsn.Path, "/"), User: dsn.User.Username(),
			Password: contract.SecretRef{Secret: "db-password"}, SSLMode: "disable"},
		requestAdmin: contract.SecretResult{Files: map[string]contract.SecretFileResult{"password": {Ref: "admin-password", Version: 1}}},
	} {
		results[name], err = json.Marshal(v)
		require.NoError(t, err)
	}
	nodes, err := miniflux{}.Render(ctx, app.RenderRequest{Tenant: "flux", Config: json.RawMessage(`{"fetcherAllowPrivateNetworks": true}`), Results: results})
	require.NoError(t, err)
	spec := nodes[0].Spec
	res, err := rc.Provision(ctx, resource.Request{Tenant: "flux", Instance: nodes[0].Name, Type: contract.Instance, Spec: spec,
		Secrets: map[string][]byte{"db-password": []byte(dbPassword), "admin-password": []byte("admin-password-1")}})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "flux", Instance: nodes[0].Name, Type: contract.Instance, Spec: spec})
	})
	var ir contract.InstanceResult
	require.NoError(t, json.Unmarshal(res.Data, &ir))
	return &node{rc: rc, spec: spec, addr: ir.Addresses["http"], pluginLog: log}
}

// run renders an operation's command and runs it in the node as the host does; it
// returns the command's stdout and stderr.
func (n *node) run(t *testing.T, operation string, input string) (string, string) {
	t.Helper()
	cmd, err := miniflux{}.Command(context.Background(), app.CommandRequest{Operation: operation, Input: json.RawMessage(input), Tenant: "flux"})
	require.NoError(t, err)
	return n.exec(t, operation, cmd)
}

// exec runs a command in the node as the host does.
func (n *node) exec(t *testing.T, operation string, cmd app.Command) (string, string) {
	t.Helper()
	ctx := context.Background()
	var stdout, stderr strings.Builder
	res, err := n.rc.Exec(ctx, resource.ExecRequest{
		Tenant: "flux", Instance: cmd.Node, Type: contract.Instance, Spec: n.spec,
		Binary: cmd.Binary, Args: cmd.Args, Env: cmd.Env, Stdin: cmd.Stdin, TTY: cmd.TTY, Timeout: time.Minute,
	}, func(o resource.ExecOutput) error {
		if o.Stream == "stderr" {
			stderr.Write(o.Data)
		} else {
			stdout.Write(o.Data)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s: %s\nstdout: %s\nstderr: %s", operation, res.Status, stdout.String(), stderr.String())
	return stdout.String(), stderr.String()
}

// api calls Miniflux's REST API as username with password.
func (n *node) api(t *testing.T, method, path, username, password string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+n.addr+path, rd)
	require.NoError(t, err)
	req.SetBasicAuth(username, password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestOperationsOnARealMiniflux(t *testing.T) {
	n := startMiniflux(t)
	const password, newPassword = "first password of alice", "second password of alice"

	// create-user makes a user who signs in with that password; the password shows in
	// no output and no log of the provider.
	stdout, stderr := n.run(t, opCreateUser, `{"username": "alice", "password": "`+password+`", "admin": true}`)
	for _, s := range []string{stdout, stderr, n.pluginLog.String()} {
		require.NotContains(t, s, password)
	}
	code, body := n.api(t, http.MethodGet, "/v1/me", "alice", password, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var me struct {
		Username string `json:"username"`
		IsAdmin  bool   `json:"is_admin"`
	}
	require.NoError(t, json.Unmarshal(body, &me))
	require.Equal(t, "alice", me.Username)
	require.True(t, me.IsAdmin)

	// admin: false makes a user who signs in and is no administrator, through Miniflux's
	// API as the node's administrator; neither password shows anywhere.
	const bobPassword = "bob's \"quoted\" \\ password"
	stdout, stderr = n.run(t, opCreateUser, `{"username": "bob", "password": "bob's \"quoted\" \\ password", "admin": false}`)
	for _, s := range []string{stdout, stderr, n.pluginLog.String()} {
		require.NotContains(t, s, bobPassword)
		require.NotContains(t, s, "admin-password-1")
	}
	require.Contains(t, stdout, "user bob created")
	code, body = n.api(t, http.MethodGet, "/v1/me", "bob", bobPassword, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	me.IsAdmin = true
	require.NoError(t, json.Unmarshal(body, &me))
	require.Equal(t, "bob", me.Username)
	require.False(t, me.IsAdmin)
	code, _ = n.api(t, http.MethodGet, "/v1/users", "bob", bobPassword, nil)
	require.Equal(t, http.StatusForbidden, code, "a user who is not an administrator lists no users")

	// The OPML export holds the feeds made through Miniflux's API.
	feeds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprintf(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Feed %s</title><link>http://example.org%s</link>
			<item><title>First post</title><link>http://example.org%s/1</link><guid>%s-1</guid></item></channel></rss>`, r.URL.Path, r.URL.Path, r.URL.Path, r.URL.Path)
	}))
	defer feeds.Close()
	code, body = n.api(t, http.MethodGet, "/v1/categories", "alice", password, nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var categories []struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &categories))
	require.NotEmpty(t, categories)
	want := []string{feeds.URL + "/news.xml", feeds.URL + "/blog.xml"}
	for _, u := range want {
		code, body = n.api(t, http.MethodPost, "/v1/feeds", "alice", password, map[string]any{"feed_url": u, "category_id": categories[0].ID})
		require.Equal(t, http.StatusCreated, code, "%s", body)
	}
	opml, _ := n.run(t, opExportOPML, `{"username": "alice"}`)
	var doc struct {
		Outlines []struct {
			Outlines []struct {
				XMLURL string `xml:"xmlUrl,attr"`
			} `xml:"outline"`
		} `xml:"body>outline"`
	}
	require.NoError(t, xml.Unmarshal([]byte(opml), &doc), opml)
	var got []string
	for _, category := range doc.Outlines {
		for _, o := range category.Outlines {
			got = append(got, o.XMLURL)
		}
	}
	require.ElementsMatch(t, want, got)

	for _, op := range []string{opRefreshFeeds, opFlushSessions, opCleanup} {
		n.run(t, op, "")
	}

	// reset-password: the old password no longer signs in, the new one does.
	stdout, stderr = n.run(t, opResetPassword, `{"username": "alice", "password": "`+newPassword+`"}`)
	require.Contains(t, stdout, "Password changed!")
	for _, s := range []string{stdout, stderr, n.pluginLog.String()} {
		require.NotContains(t, s, newPassword)
	}
	code, _ = n.api(t, http.MethodGet, "/v1/me", "alice", password, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = n.api(t, http.MethodGet, "/v1/me", "alice", newPassword, nil)
	require.Equal(t, http.StatusOK, code)
}

func TestCommandsKeepSecretsOffTheCommandLine(t *testing.T) {
	t.Parallel()
	ops, err := miniflux{}.Operations(context.Background())
	require.NoError(t, err)
	for _, op := range ops {
		if op.Name == "backup" || op.Name == "restore" {
			continue
		}
		inputs := []string{`{}`}
		if op.Input != nil {
			inputs = []string{`{"username": "bob", "password": "pass-of-bob"}`, `{"username": "bob", "password": "pass-of-bob", "admin": false}`}
		}
		for _, input := range inputs {
			cmd, err := miniflux{}.Command(context.Background(), app.CommandRequest{Operation: op.Name, Input: json.RawMessage(input)})
			require.NoError(t, err, op.Name)
			require.Equal(t, "web", cmd.Node)
			for name, v := range app.SecretInputs(op.Input, json.RawMessage(input)) {
				require.NotContains(t, strings.Join(cmd.Args, " ")+strings.Join(slices.Collect(maps.Values(cmd.Env)), " "), v, name)
				require.Contains(t, string(cmd.Stdin), v, name)
			}
		}
	}
	_, err = miniflux{}.Command(context.Background(), app.CommandRequest{Operation: opCreateUser, Input: json.RawMessage(`{"username": "bob\nx", "password": "pass-of-bob"}`)})
	require.Equal(t, "input/username", sdk.FieldOf(err))
	_, err = miniflux{}.Command(context.Background(), app.CommandRequest{Operation: "backup"})
	require.Equal(t, sdk.CodeUnsupported, sdk.CodeOf(err))
}

func TestAdministratorsFollowTheAdminGroupOnARealMiniflux(t *testing.T) {
	n := startMiniflux(t)
	const adminPassword = "admin-password-1"
	isAdmin := map[string]bool{"alice": false, "bob": true, "carol": false}
	for name, admin := range isAdmin {
		code, body := n.api(t, http.MethodPost, "/v1/users", "admin", adminPassword,
			map[string]any{"username": name, "password": "password of " + name, "is_admin": admin})
		require.Equal(t, http.StatusCreated, code, "%s", body)
	}
	admins := func() map[string]bool {
		code, body := n.api(t, http.MethodGet, "/v1/users", "admin", adminPassword, nil)
		require.Equal(t, http.StatusOK, code, "%s", body)
		var users []struct {
			Username string `json:"username"`
			IsAdmin  bool   `json:"is_admin"`
		}
		require.NoError(t, json.Unmarshal(body, &users))
		out := map[string]bool{}
		for _, u := range users {
			out[u.Username] = u.IsAdmin
		}
		return out
	}
	sync := func(members map[string][]string) string {
		cmd, err := miniflux{}.RoleSync(context.Background(), app.CommandRequest{Operation: app.OperationSyncRoles, Tenant: "flux"},
			app.RoleSyncInput{Members: members})
		require.NoError(t, err)
		stdout, stderr := n.exec(t, app.OperationSyncRoles, cmd)
		for _, s := range []string{stdout, stderr, n.pluginLog.String()} {
			require.NotContains(t, s, adminPassword)
		}
		return stdout
	}

	// alice joins miniflux-admins; bob, an administrator made in Miniflux, is in no role
	// group and stops being one; the node's own admin stays one.
	out := sync(map[string][]string{"miniflux-admins": {"alice"}, "miniflux-users": {"alice", "bob"}})
	require.Contains(t, out, "alice: now an administrator")
	require.Contains(t, out, "bob: no longer an administrator")
	require.Equal(t, map[string]bool{"admin": true, "alice": true, "bob": false, "carol": false}, admins())

	// Again: nothing to change.
	require.Contains(t, sync(map[string][]string{"miniflux-admins": {"alice"}}), "4 users checked, 0 changed")

	// alice leaves the group (or is disabled, or deleted: she is then in no list).
	require.Contains(t, sync(map[string][]string{"miniflux-admins": {}}), "alice: no longer an administrator")
	require.Equal(t, map[string]bool{"admin": true, "alice": false, "bob": false, "carol": false}, admins())
}
