package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // the store's SQLite, to move a grace period's end
)

// nodePID reads the pid the local provider recorded for a node.
func (h *host) nodePID(namespace, node string) int {
	var st struct {
		PID int `json:"pid"`
	}
	require.NoError(h.t, json.Unmarshal([]byte(h.nodeFile(namespace, node, "state.json")), &st))
	return st.PID
}

// nodeSpecHash reads the hash of the effective spec the local provider recorded for a
// node: it changes with anything a build changes in the node.
func (h *host) nodeSpecHash(namespace, node string) string {
	var st struct {
		Hash string `json:"hash"`
	}
	require.NoError(h.t, json.Unmarshal([]byte(h.nodeFile(namespace, node, "state.json")), &st))
	require.NotEmpty(h.t, st.Hash)
	return st.Hash
}

func environ(t *testing.T, pid int) map[string]string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	env := map[string]string{}
	for _, kv := range strings.Split(string(raw), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// signIn proves Miniflux's answer on addr: its sign-in page, and whether user:password
// is accepted by its API.
func signInPage(t *testing.T, addr string) string {
	resp, err := http.Get("http://" + addr + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func apiLogin(t *testing.T, addr, user, password string) int {
	req, err := http.NewRequest("GET", "http://"+addr+"/v1/me", nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func metrics(t *testing.T, addr, password string) int {
	req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	require.NoError(t, err)
	req.SetBasicAuth("metrics", password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestMinifluxOnTheEmbeddedDefault(t *testing.T) {
	h := startHost(t)
	acme := h.create("acme")
	beta := h.create("beta")

	// A wrong type is refused with its location and without its value; nothing is kept.
	var refusal apiError
	code := h.call("POST", "/deployments/"+acme.ID+"/submit",
		minifluxConfig("acme.example.org", map[string]any{"adminUsername": "boss", "pollingFrequency": "every-7-minutes"}), &refusal)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "invalid_configuration", refusal.Error.Code)
	require.Equal(t, "/apps/miniflux/options/pollingFrequency", refusal.Error.Location)
	require.NotContains(t, refusal.Error.Message, "every-7-minutes")
	after := h.deployment(acme.ID)
	require.JSONEq(t, `{}`, string(after.Config), "nothing stored")
	require.Nil(t, after.LastBuild, "nothing queued")

	// Two deployments, each its own Miniflux.
	ba := h.submit(acme.ID, minifluxConfig("acme.example.org", map[string]any{"adminUsername": "boss"}))
	bb := h.submit(beta.ID, minifluxConfig("beta.example.org", nil))
	require.Equal(t, "succeeded", h.wait(ba.ID).State)
	require.Equal(t, "succeeded", h.wait(bb.ID).State)
	acme, beta = h.deployment(acme.ID), h.deployment(beta.ID)
	require.Equal(t, "active", acme.State)
	addrA, addrB := acme.Nodes["miniflux-web"]["http"], beta.Nodes["miniflux-web"]["http"]
	require.NotEmpty(t, addrA)
	require.NotEqual(t, addrA, addrB)
	require.Contains(t, signInPage(t, addrA), "<title>Sign In - Miniflux</title>")
	require.Contains(t, signInPage(t, addrB), "<title>Sign In - Miniflux</title>")

	// acme's domain is acme's: beta cannot take it, nor a name under it.
	for _, domain := range []string{"acme.example.org", "feeds.acme.example.org"} {
		refusal = apiError{}
		require.Equal(t, http.StatusConflict, h.call("POST", "/deployments/"+beta.ID+"/submit", minifluxConfig(domain, nil), &refusal), domain)
		require.Equal(t, "conflict", refusal.Error.Code)
		require.Equal(t, "/domain", refusal.Error.Location)
		require.Contains(t, refusal.Error.Message, domain+" is taken")
		require.NotContains(t, refusal.Error.Message, acme.ID, "the other deployment is not named")
	}

	// Each accepts its own generated admin password, which only its node was given.
	pwA := h.nodeFile("acme", "miniflux-web", "admin-password")
	pwB := h.nodeFile("beta", "miniflux-web", "admin-password")
	require.Len(t, pwA, 24)
	require.NotEqual(t, pwA, pwB)
	require.Equal(t, http.StatusOK, apiLogin(t, addrA, "boss", pwA))
	require.Equal(t, http.StatusOK, apiLogin(t, addrB, "admin", pwB))
	require.Equal(t, http.StatusUnauthorized, apiLogin(t, addrA, "admin", pwB))
	require.Equal(t, http.StatusUnauthorized, apiLogin(t, addrB, "boss", pwA))

	// Neither can reach the other's database.
	dsnA := h.nodeFile("acme", "miniflux-web", "database-url")
	dsnB := h.nodeFile("beta", "miniflux-web", "database-url")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsnA)
	require.NoError(t, err, "acme reaches its own database")
	conn.Close(ctx)
	cfgB, err := pgx.ParseConfig(dsnB)
	require.NoError(t, err)
	cfgA, err := pgx.ParseConfig(dsnA)
	require.NoError(t, err)
	cross := cfgA.Copy()
	cross.Database = cfgB.Database
	_, err = pgx.ConnectConfig(ctx, cross)
	require.Error(t, err, "acme's role must not open beta's database")
	require.Contains(t, err.Error(), "permission denied")

	// A changed option gives a new build and a restarted Miniflux that uses it.
	pidBefore := h.nodePID("acme", "miniflux-web")
	require.Equal(t, "60", environ(t, pidBefore)["POLLING_FREQUENCY"])
	// The metrics password is a writeOnly option: it goes to the secret resource, not
	// into the stored configuration, and reaches Miniflux through a file.
	const metricsPassword = "metrics-Pw-7e1b4c9a"
	b := h.submit(acme.ID, minifluxConfig("acme.example.org", map[string]any{"adminUsername": "boss", "pollingFrequency": 15,
		"metrics": map[string]any{"enable": true, "password": metricsPassword}}))
	require.NotEqual(t, ba.ID, b.ID)
	require.Equal(t, "succeeded", h.wait(b.ID).State)
	pidAfter := h.nodePID("acme", "miniflux-web")
	require.NotEqual(t, pidBefore, pidAfter, "the node restarted")
	require.Equal(t, "15", environ(t, pidAfter)["POLLING_FREQUENCY"])
	addrA = h.deployment(acme.ID).Nodes["miniflux-web"]["http"]
	require.Equal(t, http.StatusOK, apiLogin(t, addrA, "boss", pwA), "same data, same admin")
	require.NotContains(t, string(h.deployment(acme.ID).Config), metricsPassword, "the stored configuration holds no secret")
	require.Equal(t, http.StatusOK, metrics(t, addrA, metricsPassword))
	require.Equal(t, http.StatusNotFound, metrics(t, addrA, "not-the-password"))
	// A later submit that leaves the password out keeps it.
	b = h.submit(acme.ID, minifluxConfig("acme.example.org", map[string]any{"adminUsername": "boss", "pollingFrequency": 15,
		"metrics": map[string]any{"enable": true}}))
	require.Equal(t, "succeeded", h.wait(b.ID).State)
	require.Equal(t, pidAfter, h.nodePID("acme", "miniflux-web"), "nothing changed, nothing restarted")
	require.Equal(t, http.StatusOK, metrics(t, addrA, metricsPassword))

	// Preview changes nothing and says what a submit would do.
	var plan struct {
		Changes []struct{ Action, Name, Kind string } `json:"changes"`
	}
	require.Equal(t, http.StatusOK, h.call("POST", "/deployments/"+acme.ID+"/preview", map[string]any{"domain": "acme.example.org", "apps": map[string]any{"miniflux": map[string]any{"enable": false}}}, &plan))
	actions := map[string]string{}
	for _, c := range plan.Changes {
		actions[c.Name] = c.Action
	}
	require.Equal(t, "delete", actions["miniflux-web"])
	require.Equal(t, "keep", actions["miniflux-db"], "a disabled app keeps its data")
	require.Equal(t, pidAfter, h.nodePID("acme", "miniflux-web"), "preview touched nothing")

	// Destroy removes the database and the secrets and keeps the backup bucket.
	var destroy build
	require.Equal(t, http.StatusAccepted, h.call("DELETE", "/deployments/"+acme.ID, nil, &destroy))
	require.Equal(t, "succeeded", h.wait(destroy.ID).State)
	acme = h.deployment(acme.ID)
	require.Equal(t, "destroyed", acme.State)
	require.Len(t, acme.Retained, 1)
	require.Equal(t, "miniflux-backups", acme.Retained[0].Name)
	require.WithinDuration(t, time.Now().Add(30*24*time.Hour), acme.Retained[0].Until, time.Hour)
	_, err = pgx.Connect(ctx, dsnA)
	require.Error(t, err, "the database and its role are gone")
	secretsDir := filepath.Join(h.dataDir, "plugins", "embedded", "acme")
	left, _ := filepath.Glob(filepath.Join(secretsDir, "*"))
	for _, l := range left {
		require.Contains(t, filepath.Base(l), "backups", "only the backup bucket's key is kept, found %s", l)
	}
	require.NoDirExists(t, h.nodeDir("acme", "miniflux-web"))
	require.True(t, bucketExists(t, h, "acme-backups"), "the backup bucket is kept")
	require.Equal(t, http.StatusOK, apiLogin(t, addrB, "admin", pwB), "beta is untouched")
	require.True(t, bucketExists(t, h, "beta-backups"))

	// The grace period ends (while fedhost is stopped, its end is moved to the past): the
	// retention job, which runs at start and then hourly, removes the bucket and its key.
	h.stop()
	db, err := sql.Open("sqlite", filepath.Join(h.dataDir, "fedhost.db"))
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE resources SET retain_until = ? WHERE deployment_id = ?`, time.Now().Add(-time.Minute).UTC(), acme.ID)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	h.start()
	require.Eventually(t, func() bool { return len(h.deployment(acme.ID).Retained) == 0 }, time.Minute, 200*time.Millisecond,
		"the retained bucket outlived its grace period")
	require.False(t, bucketExists(t, h, "acme-backups"), "the bucket is deleted at the provider")
	left, _ = filepath.Glob(filepath.Join(secretsDir, "*"))
	require.Empty(t, left, "and its key with it")
	require.True(t, bucketExists(t, h, "beta-backups"), "another deployment's bucket stays")
	addrB = h.deployment(beta.ID).Nodes["miniflux-web"]["http"]

	// Suspend stops beta's Miniflux and keeps its data; resume brings it back.
	var sb build
	require.Equal(t, http.StatusAccepted, h.call("POST", "/deployments/"+beta.ID+"/suspend", nil, &sb))
	require.Equal(t, "succeeded", h.wait(sb.ID).State)
	require.Equal(t, "suspended", h.deployment(beta.ID).State)
	_, err = http.Get("http://" + addrB + "/")
	require.Error(t, err, "a suspended Miniflux does not answer")
	var rb build
	require.Equal(t, http.StatusAccepted, h.call("POST", "/deployments/"+beta.ID+"/resume", nil, &rb))
	require.Equal(t, "succeeded", h.wait(rb.ID).State)
	addrB = h.deployment(beta.ID).Nodes["miniflux-web"]["http"]
	require.Equal(t, http.StatusOK, apiLogin(t, addrB, "admin", pwB), "resumed with its data")

	// Disabled, Miniflux stops and keeps its database; with deleteData the next build
	// deletes it.
	disabled := map[string]any{"domain": "beta.example.org", "apps": map[string]any{"miniflux": map[string]any{"enable": false}}}
	require.Equal(t, "succeeded", h.wait(h.submit(beta.ID, disabled).ID).State)
	beta = h.deployment(beta.ID)
	require.Empty(t, beta.Nodes)
	conn, err = pgx.Connect(ctx, dsnB)
	require.NoError(t, err, "a disabled app keeps its database")
	conn.Close(ctx)
	deleteData := map[string]any{"domain": "beta.example.org", "apps": map[string]any{"miniflux": map[string]any{"enable": false, "deleteData": true}}}
	require.Equal(t, "succeeded", h.wait(h.submit(beta.ID, deleteData).ID).State)
	_, err = pgx.Connect(ctx, dsnB)
	require.Error(t, err, "deleteData removed the database")
	rest := h.deployment(beta.ID).Resources
	require.Len(t, rest, 1, "only the deployment's directory, which holds its users and goes with the deployment")
	require.Equal(t, "directory", rest[0].Name)
	require.False(t, bucketExists(t, h, "beta-backups"), "deleteData removed the buckets")

	// No generated secret appears in any log of the run.
	h.stop()
	secrets := map[string]string{"acme admin password": pwA, "beta admin password": pwB, "metrics password": metricsPassword}
	for name, dsn := range map[string]string{"acme": dsnA, "beta": dsnB} {
		c, err := pgx.ParseConfig(dsn)
		require.NoError(t, err)
		secrets[name+" database password"] = c.Password
	}
	logs := append([]string{}, h.logs...)
	files, _ := filepath.Glob(filepath.Join(h.dataDir, "plugins", "*", "*.log"))
	more, _ := filepath.Glob(filepath.Join(h.dataDir, "plugins", "*", "*", "*.log"))
	nodeLogs, _ := filepath.Glob(filepath.Join(h.dataDir, "plugins", "local", "nodes", "*", "*", "logs", "*"))
	for _, f := range append(append(files, more...), nodeLogs...) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		logs = append(logs, string(b))
	}
	require.GreaterOrEqual(t, len(logs), 3)
	for name, v := range secrets {
		require.GreaterOrEqual(t, len(v), 16, name)
		for _, l := range logs {
			require.NotContains(t, l, v, "the %s is in a log", name)
		}
	}
}
