package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

//go:embed schema.json
var schemaJSON []byte

//go:embed icon.svg
var icon []byte

// version is the Miniflux release this plugin runs: the one `make build` builds from the
// Go module proxy into bin/artifacts/miniflux. A variable, so that tests of updates can
// build the plugin as another version (-ldflags -X main.version=...).
var version = "2.3.5"

// binary is the artifact the node runs. Packagers who keep several Miniflux releases side
// by side in the artifacts directory build each plugin version with its own
// (-ldflags -X main.binary=miniflux-2.4.0).
var binary = "miniflux"

// The instance names of the requests.
const (
	requestDB      = "db"
	requestAdmin   = "admin"
	requestBackups = "backups"
	requestSSO     = "sso"
)

type oidcConfig struct {
	Enable           bool   `json:"enable"`
	ProviderName     string `json:"providerName"`
	UserCreation     bool   `json:"userCreation"`
	AdminGroup       string `json:"adminGroup"`
	DisableLocalAuth bool   `json:"disableLocalAuth"`
}

type metricsConfig struct {
	Enable          bool     `json:"enable"`
	Username        string   `json:"username"`
	Password        string   `json:"password"`
	AllowedNetworks []string `json:"allowedNetworks"`
}

type config struct {
	AdminUsername            string `json:"adminUsername"`
	PollingFrequency         int    `json:"pollingFrequency"`
	BatchSize                int    `json:"batchSize"`
	PollingScheduler         string `json:"pollingScheduler"`
	CleanupArchiveReadDays   int    `json:"cleanupArchiveReadDays"`
	CleanupArchiveUnreadDays int    `json:"cleanupArchiveUnreadDays"`
	MediaProxyMode           string `json:"mediaProxyMode"`
	FetchYouTubeWatchTime    bool   `json:"fetchYouTubeWatchTime"`
	FetcherAllowPrivateNets  bool   `json:"fetcherAllowPrivateNetworks"`
	HTTPClientTimeout        int    `json:"httpClientTimeout"`
	WorkerPoolSize           int    `json:"workerPoolSize"`
	LogLevel                 string `json:"logLevel"`
	// Fetcher holds the fetch options from fetcherSince on (fetcher.go); before it they
	// are HTTPClientTimeout and FetcherAllowPrivateNets.
	Fetcher fetcherConfig `json:"fetcher"`
	OIDC    oidcConfig    `json:"oidc"`
	Metrics metricsConfig `json:"metrics"`
	// HostName is the host's to route (x-hostname): Miniflux learns it through BASE_URL's
	// ${url:http} once the front door serves it (issue 11, item 4).
	HostName string `json:"hostName"`
}

// defaults are those of schema.json; a test holds the two together.
func defaults() config {
	return config{
		AdminUsername: "admin", PollingFrequency: 60, BatchSize: 100, PollingScheduler: "round_robin",
		CleanupArchiveReadDays: 60, CleanupArchiveUnreadDays: 180, MediaProxyMode: "http-only",
		HTTPClientTimeout: 20, WorkerPoolSize: 16, LogLevel: "info", Fetcher: fetcherConfig{Timeout: 20},
		OIDC:     oidcConfig{ProviderName: "Single sign-on", UserCreation: true, AdminGroup: "miniflux-admins"},
		Metrics:  metricsConfig{Username: "metrics", AllowedNetworks: []string{"127.0.0.1/8"}},
		HostName: "feeds",
	}
}

// parse reads a configuration the host validated against the schema of this version
// (schemaFor) over the defaults.
func parse(raw json.RawMessage) (config, error) {
	c := defaults()
	if len(raw) == 0 {
		return c, nil
	}
	if err := checkShape(raw); err != nil {
		return c, sdk.Invalid("config", "the configuration does not follow the Miniflux %s schema: %v", version, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, sdk.Invalid("config", "the configuration does not follow the Miniflux schema: %v", err)
	}
	return c, nil
}

type miniflux struct{}

func (miniflux) Schema(context.Context) (app.Schema, error) {
	doc, err := schemaFor(version)
	if err != nil {
		return app.Schema{}, err
	}
	return app.Schema{JSON: doc, Icon: icon, IconMediaType: "image/svg+xml"}, nil
}

func spec(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed, marshalable types reach here
	}
	return b
}

func (miniflux) Requests(_ context.Context, req app.RequestsRequest) ([]app.ResourceRequest, error) {
	c, err := parse(req.Config)
	if err != nil {
		return nil, err
	}
	reqs := []app.ResourceRequest{
		{Name: requestAdmin, Type: contract.Secret, Spec: spec(contract.SecretRequest{Files: map[string]contract.SecretFile{
			"password": {Generate: &contract.Generate{Length: 24, Encoding: "alphanumeric"}},
		}})},
		{Name: requestDB, Type: contract.PostgreSQL, Spec: spec(contract.PostgreSQLRequest{})},
		{Name: requestBackups, Type: contract.S3, Spec: spec(contract.S3Request{
			Buckets: map[string]contract.S3Bucket{"backups": {Backup: true}},
			Keys:    map[string]contract.S3Key{"backup": {Grants: map[string]string{"backups": "owner"}}},
		})},
	}
	if c.OIDC.Enable {
		// The host puts the app's public URL for ${url:http}, as in the node's env; the
		// admin group signs in too, and the directory holds it.
		allowed := []string{"miniflux-users", "miniflux-admins"}
		if g := c.OIDC.AdminGroup; g != "" && !slices.Contains(allowed, g) {
			allowed = append(allowed, g)
		}
		reqs = append(reqs, app.ResourceRequest{Name: requestSSO, Type: contract.OIDC, Spec: spec(contract.OIDCRequest{
			Name:          "Miniflux",
			RedirectURIs:  []string{"${url:http}oauth2/oidc/callback"},
			Scopes:        []string{"openid", "profile", "email", "groups"},
			AllowedGroups: allowed,
		})})
	}
	return reqs, nil
}

// result decodes the result of request name into v.
func result(req app.RenderRequest, name string, v any) error {
	raw, ok := req.Results[name]
	if !ok {
		return sdk.Invalid("results/"+name, "the result of request %q is missing", name)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return sdk.Invalid("results/"+name, "the result of request %q is not what its contract says: %v", name, err)
	}
	return nil
}

func (miniflux) Render(_ context.Context, req app.RenderRequest) ([]app.Node, error) {
	c, err := parse(req.Config)
	if err != nil {
		return nil, err
	}
	var db contract.PostgreSQLResult
	if err := result(req, requestDB, &db); err != nil {
		return nil, err
	}
	var admin contract.SecretResult
	if err := result(req, requestAdmin, &admin); err != nil {
		return nil, err
	}
	adminPassword, ok := admin.Files["password"]
	if !ok {
		return nil, sdk.Invalid("results/admin/files/password", "the admin password is missing from the secret result")
	}
	dsn := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(db.User, "PASSWORD"),
		Host:     db.Host + ":" + strconv.Itoa(db.Port),
		Path:     "/" + db.Database,
		RawQuery: url.Values{"sslmode": {db.SSLMode}}.Encode(),
	}
	// The password goes in as a placeholder the instance provider fills from the secret
	// store; it must not be escaped by url.URL, so it is swapped in after.
	databaseURL := bytes.Replace([]byte(dsn.String()), []byte("PASSWORD"), []byte("${secret:"+db.Password.Secret+"}"), 1)

	fetch := c.fetcherSettings()
	node := contract.InstanceRequest{
		Artifact: contract.Artifact{Binary: binary},
		Env: map[string]string{
			"LISTEN_ADDR":                    "${host}:${port:http}",
			"BASE_URL":                       "${url:http}",
			"DATABASE_URL_FILE":              "${file:database-url}",
			"RUN_MIGRATIONS":                 "1",
			"CREATE_ADMIN":                   "1",
			"ADMIN_USERNAME":                 c.AdminUsername,
			"ADMIN_PASSWORD_FILE":            "${file:admin-password}",
			"POLLING_FREQUENCY":              strconv.Itoa(c.PollingFrequency),
			"BATCH_SIZE":                     strconv.Itoa(c.BatchSize),
			"POLLING_SCHEDULER":              c.PollingScheduler,
			"CLEANUP_ARCHIVE_READ_DAYS":      strconv.Itoa(c.CleanupArchiveReadDays),
			"CLEANUP_ARCHIVE_UNREAD_DAYS":    strconv.Itoa(c.CleanupArchiveUnreadDays),
			"MEDIA_PROXY_MODE":               c.MediaProxyMode,
			"FETCH_YOUTUBE_WATCH_TIME":       strconv.FormatBool(c.FetchYouTubeWatchTime),
			"FETCHER_ALLOW_PRIVATE_NETWORKS": strconv.FormatBool(fetch.AllowPrivateNetworks),
			"HTTP_CLIENT_TIMEOUT":            strconv.Itoa(fetch.Timeout),
			"WORKER_POOL_SIZE":               strconv.Itoa(c.WorkerPoolSize),
			"LOG_LEVEL":                      c.LogLevel,
			"LOG_FORMAT":                     "json",
		},
		Files: map[string]contract.InstanceFile{
			"database-url":   {Content: string(databaseURL)},
			"admin-password": {Content: "${secret:" + adminPassword.Ref + "}"},
		},
		Ports:  []contract.Port{{Name: "http", Protocol: "http"}},
		Health: &contract.Health{Port: "http", HTTPPath: "/healthcheck", IntervalSeconds: 10, TimeoutSeconds: 5, StartSeconds: 120},
		Limits: &contract.Limits{MemoryMB: 1024},
	}
	if c.OIDC.Enable {
		var sso contract.OIDCResult
		if err := result(req, requestSSO, &sso); err != nil {
			return nil, err
		}
		node.Files["oidc-client-secret"] = contract.InstanceFile{Content: "${secret:" + sso.ClientSecret.Secret + "}"}
		for k, v := range map[string]string{
			"OAUTH2_PROVIDER":                "oidc",
			"OAUTH2_CLIENT_ID":               sso.ClientID,
			"OAUTH2_CLIENT_SECRET_FILE":      "${file:oidc-client-secret}",
			"OAUTH2_OIDC_DISCOVERY_ENDPOINT": sso.Issuer,
			"OAUTH2_REDIRECT_URL":            "${url:http}oauth2/oidc/callback",
			"OAUTH2_OIDC_PROVIDER_NAME":      c.OIDC.ProviderName,
			"OAUTH2_USER_CREATION":           boolFlag(c.OIDC.UserCreation),
			"OAUTH2_ADMIN_GROUP":             c.OIDC.AdminGroup,
			"OAUTH2_GROUP_CLAIM":             "groups",
			"OAUTH2_ADDITIONAL_SCOPES":       "groups",
			"DISABLE_LOCAL_AUTH":             strconv.FormatBool(c.OIDC.DisableLocalAuth),
		} {
			node.Env[k] = v
		}
	}
	if c.Metrics.Enable {
		if c.Metrics.Password == "" {
			return nil, sdk.Invalid("config/metrics/password", "metrics need a password")
		}
		// The host hands a writeOnly option over as a ${secret:REF} placeholder; it goes
		// into a file, never into the environment.
		node.Files["metrics-password"] = contract.InstanceFile{Content: c.Metrics.Password}
		node.Env["METRICS_COLLECTOR"] = "1"
		node.Env["METRICS_USERNAME"] = c.Metrics.Username
		node.Env["METRICS_PASSWORD_FILE"] = "${file:metrics-password}"
		node.Env["METRICS_ALLOWED_NETWORKS"] = strings.Join(c.Metrics.AllowedNetworks, ",")
	}
	return []app.Node{{Name: "web", Spec: spec(node)}}, nil
}

func boolFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (miniflux) VersionGuard(context.Context) (app.VersionGuard, error) {
	// Miniflux migrates its database forward on start from any 2.x release.
	return app.VersionGuard{Version: version, MaxStep: app.StepMajor, OnDowngrade: app.DowngradeRefuse}, nil
}

func (miniflux) RoleGroups(context.Context) ([]app.RoleGroup, error) {
	return []app.RoleGroup{
		{Name: "miniflux-admins", Description: "Miniflux administrators", Roles: []string{"admin"}},
		{Name: "miniflux-users", Description: "Miniflux users", Roles: []string{"user"}},
	}, nil
}

func describe() sdk.Description {
	return sdk.Description{
		Name:    "miniflux",
		Version: version,
		Summary: fmt.Sprintf("Miniflux %s, a minimalist feed reader", version),
		Serves:  []string{"miniflux"},
	}
}

var (
	_ app.App         = miniflux{}
	_ app.Operator    = miniflux{}
	_ app.Guarded     = miniflux{}
	_ app.RoleGrouper = miniflux{}
	_ app.Renamer     = miniflux{}
)
