package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/schema"
)

// setupWithApps is setup with a catalog of the real Miniflux and Pixelfed plugins; with
// changes to the engine's options.
func setupWithApps(t *testing.T, change ...func(*deploy.Options)) *bundle {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	lock := plugins.Lock{}
	for name, pkg := range map[string]string{"fedhost-app-miniflux": "../../plugins/apps/miniflux", "fedhost-app-pixelfed": "../../plugins/apps/pixelfed"} {
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, out)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(dir))
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	trail := audit.New(st, audit.Options{})
	accounts := auth.New(st, auth.Options{Audit: trail})
	opts := deploy.Options{Store: st, Plugins: m, Catalog: cat}
	for _, c := range change {
		c(&opts)
	}
	engine := deploy.New(opts)
	// Builds are queued and never run: the test looks at what a submit stores.
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	engine.SetQueue(q)
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail, Version: "1.2.3"})
	return &bundle{app: app, st: st, accounts: accounts, trail: trail}
}

// Two enabled apps of one deployment cannot take one host name: the submit is refused
// with a problem at each app's option, and so is a name that is not a DNS name. The
// deployment shows the host names it takes.
func TestSubmitRefusesAHostNameTwoAppsTake(t *testing.T) {
	t.Parallel()
	b := setupWithApps(t)
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))

	details := func(config string) []schema.Problem {
		t.Helper()
		status, body := b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/submit", config)
		require.Equal(t, http.StatusBadRequest, status, "%s", body)
		var answer struct {
			Error api.Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &answer))
		require.Equal(t, "invalid_configuration", answer.Error.Code)
		return answer.Error.Details
	}
	taken := "Host name feeds is taken by another app of this deployment: choose another"
	require.Equal(t, []schema.Problem{
		{Location: "/apps/miniflux/options/hostName", Message: taken},
		{Location: "/apps/pixelfed/options/host_name", Message: taken},
	}, details(`{"domain":"acme.example.org","apps":{"miniflux":{"enable":true},"pixelfed":{"enable":true,"options":{"host_name":"feeds"}}}}`),
		"Miniflux's default, feeds, is taken by Pixelfed's")

	status, body = b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/submit",
		`{"domain":"acme.example.org","apps":{"miniflux":{"enable":true},"pixelfed":{"enable":true,"options":{"host_name":"photos.eu"}}}}`)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	status, body = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID, "")
	require.Equal(t, http.StatusOK, status)
	var got api.Deployment
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, map[string]string{"miniflux": "feeds.acme.example.org", "pixelfed": "photos.eu.acme.example.org"}, got.Hosts,
		"Miniflux's default is feeds")

	problems := details(`{"domain":"acme.example.org","apps":{"miniflux":{"enable":true,"options":{"hostName":"Feeds_1"}}}}`)
	require.Len(t, problems, 1)
	require.Equal(t, "/apps/miniflux/options/hostName", problems[0].Location)
}

// With a route and a tls provider and no dns provider, the deployment answers its front
// door: each app's URL, whether its route is live, its certificate as the tls row holds
// it, and the records the operator must create at their own DNS host. Nothing secret.
func TestDeploymentAnswersItsFrontDoor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWithApps(t, func(o *deploy.Options) {
		o.Environment = []config.Resource{{Type: contract.TLS, Provider: "localca"}, {Type: contract.Route, Provider: "caddy"}}
		o.FrontDoor = deploy.FrontDoor{Addresses: []string{"198.51.100.4"}, HTTPSPort: 443, HTTPPort: 80}
	})
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	status, body = b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/submit", `{"domain":"acme.example.org","apps":{"miniflux":{"enable":true}}}`)
	require.Equal(t, http.StatusAccepted, status, "%s", body)

	notAfter := time.Now().Add(60 * 24 * time.Hour).UTC().Truncate(time.Second)
	cert, _ := json.Marshal(contract.TLSResult{Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", Key: contract.SecretRef{Secret: "acme/miniflux-tls-creds/key@v1"},
		NotAfter: notAfter.Format(time.RFC3339), RenewAfter: notAfter.Add(-30 * 24 * time.Hour).Format(time.RFC3339), Issuer: "fedhost local CA"})
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-tls", App: "miniflux", Type: contract.TLS, Provider: "localca",
		Spec: `{"domains":["feeds.acme.example.org"]}`, Result: string(cert), State: store.ResourceProvisioned}))
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-route", App: "miniflux", Type: contract.Route, Provider: "caddy",
		Spec: "{}", Result: `{"urls":["https://feeds.acme.example.org/"]}`, State: store.ResourceProvisioned}))
	require.NoError(t, b.st.UpdateDeployment(ctx, d.ID, map[string]any{"state": deploy.StateActive}))

	status, body = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID, "")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, string(body), "tls-creds", "no secret reference")
	var got api.Deployment
	require.NoError(t, json.Unmarshal(body, &got))
	require.NotNil(t, got.FrontDoor)
	require.Len(t, got.FrontDoor.Apps, 1)
	app := got.FrontDoor.Apps[0]
	require.Equal(t, "https://feeds.acme.example.org/", app.URL)
	require.True(t, app.Live)
	require.Equal(t, deploy.CertificateValid, app.Certificate.State)
	require.Equal(t, "fedhost local CA", app.Certificate.Issuer)
	require.Equal(t, notAfter, app.Certificate.NotAfter.UTC())
	require.Equal(t, &deploy.ZoneStatus{Name: "acme.example.org", Records: []deploy.RecordStatus{
		{Name: "feeds.acme.example.org", Type: "A", Value: "198.51.100.4", State: deploy.RecordManual}}}, got.FrontDoor.Zone)
}
