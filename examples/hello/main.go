// Command fedhost-app-hello is an example third-party app plugin built only against the
// fedhost sdk: a greeting page that counts its visits in a PostgreSQL database. The page
// is the program of cmd/hello-server; the plugin says what it needs (a database and a
// generated key) and how to run it (a node for the instance provider).
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

//go:embed schema.json
var schema []byte

// binary is the program the node runs, a file in the instance provider's artifacts_dir.
// Packagers who keep several builds side by side set it at build time
// (-ldflags "-X main.binary=hello-server-0.2.0").
var binary = "hello-server"

// The names of the requests, which Render finds the results under.
const (
	requestDB  = "db"
	requestKey = "key"
)

type config struct {
	Greeting string `json:"greeting"`
	Theme    string `json:"theme"`
}

// parse reads the options. The host has checked them against schema.json and filled in
// its defaults; an unknown option is refused all the same, naming it.
func parse(raw json.RawMessage) (config, error) {
	var c config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, sdk.Invalid("config", "the options do not follow the hello schema: %v", err)
	}
	return c, nil
}

// settingsSchema is the JSON Schema of the plugin's settings: what the hosting provider
// sets for every deployment, in fedhost.hcl's app "hello" block.
const settingsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "footer": {"type": "string", "maxLength": 200, "description": "A line under every page, such as the hosting provider's name"}
  },
  "additionalProperties": false
}`

type hello struct {
	mu     sync.RWMutex
	footer string
}

// Configure takes the settings; the host has checked them against settingsSchema.
func (h *hello) Configure(_ context.Context, settings json.RawMessage) error {
	var s struct {
		Footer string `json:"footer"`
	}
	if err := json.Unmarshal(settings, &s); err != nil {
		return sdk.Invalid("settings", "the settings are not a JSON object: %v", err)
	}
	h.mu.Lock()
	h.footer = s.Footer
	h.mu.Unlock()
	return nil
}

func (*hello) Schema(context.Context) (app.Schema, error) {
	return app.Schema{JSON: schema}, nil
}

func (*hello) Requests(_ context.Context, req app.RequestsRequest) ([]app.ResourceRequest, error) {
	if _, err := parse(req.Config); err != nil {
		return nil, err
	}
	key, _ := json.Marshal(contract.SecretRequest{Files: map[string]contract.SecretFile{
		"cookie-key": {Generate: &contract.Generate{Length: 32, Encoding: "hex"}},
	}})
	return []app.ResourceRequest{
		{Name: requestKey, Type: contract.Secret, Spec: key},
		{Name: requestDB, Type: contract.PostgreSQL, Spec: json.RawMessage(`{}`)},
	}, nil
}

// result decodes the result of the request name into v.
func result(req app.RenderRequest, name string, v any) error {
	raw, ok := req.Results[name]
	if !ok {
		return sdk.Invalid("results/"+name, "the result of request %q is missing: provision it before rendering", name)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return sdk.Invalid("results/"+name, "the result of request %q does not follow its contract: %v", name, err)
	}
	return nil
}

func (h *hello) Render(_ context.Context, req app.RenderRequest) ([]app.Node, error) {
	c, err := parse(req.Config)
	if err != nil {
		return nil, err
	}
	var db contract.PostgreSQLResult
	if err := result(req, requestDB, &db); err != nil {
		return nil, err
	}
	var key contract.SecretResult
	if err := result(req, requestKey, &key); err != nil {
		return nil, err
	}
	cookieKey, ok := key.Files["cookie-key"]
	if !ok {
		return nil, sdk.Invalid("results/key/files/cookie-key", "the secret result has no cookie-key file: provision the request again")
	}
	// Results hold references to secrets, never their values: a file whose content is
	// ${secret:REF} gets the value when the node starts, and ${file:NAME} is its path.
	node := contract.InstanceRequest{
		Artifact: contract.Artifact{Binary: binary},
		Env: map[string]string{
			"LISTEN_ADDR":      "${host}:${port:http}",
			"GREETING":         c.Greeting,
			"THEME":            c.Theme,
			"PGHOST":           db.Host,
			"PGPORT":           strconv.Itoa(db.Port),
			"PGDATABASE":       db.Database,
			"PGUSER":           db.User,
			"PGSSLMODE":        db.SSLMode,
			"DB_PASSWORD_FILE": "${file:db-password}",
			"COOKIE_KEY_FILE":  "${file:cookie-key}",
			"FOOTER":           h.settingsFooter(),
		},
		Files: map[string]contract.InstanceFile{
			"db-password": {Content: "${secret:" + db.Password.Secret + "}"},
			"cookie-key":  {Content: "${secret:" + cookieKey.Ref + "}"},
		},
		Ports:  []contract.Port{{Name: "http", Protocol: "http"}},
		Health: &contract.Health{Port: "http", HTTPPath: "/healthz", StartSeconds: 30},
		Limits: &contract.Limits{MemoryMB: 256},
	}
	spec, err := json.Marshal(node)
	if err != nil {
		return nil, err
	}
	return []app.Node{{Name: "web", Spec: spec}}, nil
}

func (h *hello) settingsFooter() string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.footer
}

func main() {
	app.Serve(sdk.Description{
		Name:           "hello",
		Version:        "0.2.0",
		Summary:        "A greeting page that counts its visitors: the smallest fedhost app",
		Serves:         []string{"hello"},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, &hello{})
}

var (
	_ app.App        = (*hello)(nil)
	_ sdk.Configurer = (*hello)(nil)
)
