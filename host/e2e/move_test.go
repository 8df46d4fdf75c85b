package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/migration"
)

// importAnswer is the part of POST /deployments/import's answer the test reads.
type importAnswer struct {
	Apps []struct {
		App  string `json:"app"`
		From string `json:"from"`
		To   string `json:"to"`
		Data bool   `json:"data"`
	} `json:"apps"`
	Renames []struct {
		App  string `json:"app"`
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"renames"`
	Deployment string `json:"deployment"`
	Build      string `json:"build"`
}

// An operator moves a Miniflux from one fedhost (A) to another (B) running a newer
// Miniflux plugin, two processes with their own data dirs and managed servers: A exports to B's recipient (A asks B for it),
// B previews and imports the string, and B's Miniflux has A's data, signing in with A's
// administrator password, and A's directory user in her group; B confirms to A, which records it; A stays exported; and the
// string is in neither host's log nor store. It prints the downtime: from the export's
// start (A stops Miniflux) to B's Miniflux serving the data.
func TestMoveMinifluxToAnotherFedhost(t *testing.T) {
	feedServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(rss))
	}))
	defer feedServer.Close()
	// B runs a newer Miniflux plugin beside the one A has: the move is also an update.
	plugins := pluginsCopy(t)
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version=2.3.6",
		"-o", filepath.Join(plugins, "fedhost-app-miniflux_2.3.6"), "../../plugins/apps/miniflux").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lock(t, plugins)
	a, b := startHost(t), startHost(t, "FEDHOST_PLUGIN_DIR="+plugins)
	d := a.create("moving")
	// 2.3.5's flat fetch options: 2.3.6 keeps them under fetcher (renames since 2.3.6).
	options := map[string]any{"fetcherAllowPrivateNetworks": true, "httpClientTimeout": 45}
	require.Equal(t, "succeeded", a.wait(a.submit(d.ID, minifluxConfig("moving.example.org", options)).ID).State)
	addr := a.deployment(d.ID).Nodes["miniflux-web"]["http"]
	password := a.nodeFile("moving", "miniflux-web", "admin-password")
	code, body := minifluxAPI(t, addr, "admin", password, "POST", "/v1/categories", map[string]string{"title": "Moving house"})
	require.Equal(t, http.StatusCreated, code, "%s", body)
	var category struct {
		ID int `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &category))
	code, body = minifluxAPI(t, addr, "admin", password, "POST", "/v1/feeds", map[string]any{"feed_url": feedServer.URL + "/rss", "category_id": category.ID})
	require.Equal(t, http.StatusCreated, code, "%s", body)

	// A directory user with a password set through her invitation link.
	var invited struct {
		Link struct {
			URL string `json:"url"`
		} `json:"link"`
	}
	require.Equal(t, http.StatusCreated, a.call("POST", "/deployments/"+d.ID+"/users", map[string]any{"name": "alice", "groups": []string{"miniflux-users"}}, &invited))
	_, token, ok := strings.Cut(invited.Link.URL, "#")
	require.True(t, ok)
	require.Equal(t, http.StatusNoContent, a.call("POST", "/password-links/use", map[string]string{"token": token, "password": "alice-Pw-9d2f61c0"}, nil))

	// A exports to B: it asks B for its recipient.
	start := time.Now()
	var x exportAnswer
	require.Equal(t, http.StatusOK, a.call("POST", "/deployments/"+d.ID+"/export", map[string]string{"target": "http://" + b.addr + "/"}, &x))
	exported := time.Since(start)
	require.Equal(t, "exported", a.deployment(d.ID).State)

	// B previews, storing nothing, then imports.
	var preview importAnswer
	require.Equal(t, http.StatusOK, b.call("POST", "/deployments/import", map[string]any{"migration": x.Migration, "preview": true}, &preview))
	require.Len(t, preview.Apps, 1)
	require.Equal(t, "miniflux", preview.Apps[0].App)
	require.True(t, preview.Apps[0].Data, "Miniflux's data comes from A's final snapshot")
	require.Equal(t, "2.3.5", preview.Apps[0].From)
	require.Equal(t, "2.3.6", preview.Apps[0].To, "B imports at its newest version")
	require.Empty(t, preview.Deployment, "a preview stores nothing")
	renamed := map[string]string{}
	for _, r := range preview.Renames {
		require.Equal(t, "miniflux", r.App)
		renamed[r.From] = r.To
	}
	require.Equal(t, map[string]string{"/httpClientTimeout": "/fetcher/timeout", "/fetcherAllowPrivateNetworks": "/fetcher/allowPrivateNetworks"},
		renamed, "the preview names the renames the import applies")
	var imported importAnswer
	require.Equal(t, http.StatusAccepted, b.call("POST", "/deployments/import", map[string]any{"migration": x.Migration}, &imported))
	require.NotEmpty(t, imported.Build)
	done := b.wait(imported.Build)
	require.Equal(t, "succeeded", done.State, "%+v", done)
	moved := b.deployment(imported.Deployment)
	require.Equal(t, "moving", moved.Namespace)
	baddr := moved.Nodes["miniflux-web"]["http"]
	require.NotEqual(t, addr, baddr)
	// A's administrator password opens B's Miniflux: its users came with the data.
	require.Contains(t, categories(t, baddr, password), "Moving house")
	require.Contains(t, feeds(t, baddr, password), feedServer.URL+"/rss")
	downtime := time.Since(start)
	// The flat fetch options arrived under fetcher, and B's Miniflux runs with them.
	var movedConfig struct {
		Apps struct {
			Miniflux struct {
				Options map[string]json.RawMessage `json:"options"`
			} `json:"miniflux"`
		} `json:"apps"`
	}
	require.NoError(t, json.Unmarshal(moved.Config, &movedConfig))
	require.JSONEq(t, `{"timeout":45,"allowPrivateNetworks":true}`, string(movedConfig.Apps.Miniflux.Options["fetcher"]))
	require.NotContains(t, movedConfig.Apps.Miniflux.Options, "httpClientTimeout")
	require.NotContains(t, movedConfig.Apps.Miniflux.Options, "fetcherAllowPrivateNetworks")
	env := environ(t, b.nodePID("moving", "miniflux-web"))
	require.Equal(t, "45", env["HTTP_CLIENT_TIMEOUT"])
	require.Equal(t, "true", env["FETCHER_ALLOW_PRIVATE_NETWORKS"])
	// alice came along, in her group (her password hash with her: host/directory's
	// TestUsersWithHashesMoveToAnotherDirectory binds with it).
	var users []struct {
		Name   string   `json:"name"`
		Groups []string `json:"groups"`
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/deployments/"+imported.Deployment+"/users", nil, &users))
	require.Len(t, users, 1)
	require.Equal(t, "alice", users[0].Name)
	require.Contains(t, users[0].Groups, "miniflux-users")
	t.Logf("move: export %s, import until B serves the data %s, downtime %s", exported.Round(time.Millisecond),
		(downtime - exported).Round(time.Millisecond), downtime.Round(time.Millisecond))

	// B told A, and A recorded it.
	require.Eventually(t, func() bool {
		var events []struct {
			Action string `json:"action"`
			Result string `json:"result"`
		}
		require.Equal(t, http.StatusOK, a.call("GET", "/audit-events?limit=1000", nil, &events))
		for _, e := range events {
			if e.Action == "migration.confirm" && e.Result == "ok" {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "B's confirmation did not reach A")
	require.Equal(t, "exported", a.deployment(d.ID).State)

	// A revoked the read-only key of the string once B confirmed: the bucket refuses it.
	keys, err := migration.LoadKeys(b.dataDir)
	require.NoError(t, err)
	p, err := keys.Open(x.Migration, time.Now())
	require.NoError(t, err)
	ro := p.Apps["miniflux"].S3
	require.NotEmpty(t, ro.AccessKeyID)
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(ro.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ro.AccessKeyID, SecretAccessKey: ro.SecretAccessKey}, nil
		})})
	_, err = client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(ro.Bucket), Prefix: aws.String(ro.Path)})
	var re *awshttp.ResponseError
	require.True(t, errors.As(err, &re), "the revoked key is refused: %v", err)
	require.Equal(t, http.StatusForbidden, re.HTTPStatusCode(), "%v", err)

	// A second import of the same string is refused: the namespace is taken now.
	var refused apiError
	require.Equal(t, http.StatusConflict, b.call("POST", "/deployments/import", map[string]any{"migration": x.Migration}, &refused))

	// The string is in neither host's log nor store.
	for _, h := range []*host{a, b} {
		places := map[string][]byte{"log": []byte(h.log.String())}
		files, err := filepath.Glob(filepath.Join(h.dataDir, "*.db*"))
		require.NoError(t, err)
		for _, f := range files {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			places[f] = raw
		}
		for where, text := range places {
			require.False(t, bytes.Contains(text, []byte(x.Migration[20:120])), "the migration string is in %s", where)
		}
	}
}
