// Command fedhost-app-hello is an example third-party app plugin built only against the
// fedhost sdk: a static greeting page served by busybox httpd, with its text as the one
// option and a generated secret for its admin area.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

const schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "greeting": {"type": "string", "title": "Greeting", "default": "Hello, world", "maxLength": 200}
  },
  "additionalProperties": false
}`

const settingsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "image": {"type": "string", "description": "OCI image that serves the page"}
  },
  "additionalProperties": false
}`

type config struct {
	Greeting string `json:"greeting"`
}

type hello struct {
	image string
}

func (h *hello) Configure(_ context.Context, settings json.RawMessage) error {
	var s struct {
		Image string `json:"image"`
	}
	if err := json.Unmarshal(settings, &s); err != nil {
		return sdk.Invalid("settings", "%v", err)
	}
	h.image = s.Image
	return nil
}

func (h *hello) Schema(context.Context) (app.Schema, error) {
	return app.Schema{JSON: json.RawMessage(schema)}, nil
}

func (h *hello) Requests(_ context.Context, req app.RequestsRequest) ([]app.ResourceRequest, error) {
	var c config
	if err := json.Unmarshal(req.Config, &c); err != nil {
		return nil, sdk.Invalid("", "configuration is not an object: %v", err)
	}
	return []app.ResourceRequest{{
		Name: "admin-password",
		Type: "secret",
		Spec: json.RawMessage(`{"files":{"password":{"generate":{"length":24,"encoding":"base64url"}}}}`),
	}}, nil
}

func (h *hello) Render(_ context.Context, req app.RenderRequest) ([]app.Node, error) {
	var c config
	if err := json.Unmarshal(req.Config, &c); err != nil {
		return nil, sdk.Invalid("", "configuration is not an object: %v", err)
	}
	if _, ok := req.Results["admin-password"]; !ok {
		return nil, sdk.Invalid("results/admin-password", "the admin password secret is missing")
	}
	spec, err := json.Marshal(map[string]any{
		"artifact": map[string]any{"image": h.image},
		"env":      map[string]string{"GREETING": c.Greeting, "LISTEN": "${host}:${port:http}"},
		"ports":    []map[string]any{{"name": "http", "protocol": "http"}},
		"health":   map[string]any{"port": "http", "http_path": "/"},
	})
	if err != nil {
		return nil, fmt.Errorf("rendering the node: %w", err)
	}
	return []app.Node{{Name: "web", Spec: spec}}, nil
}

func main() {
	app.Serve(sdk.Description{
		Name:           "hello",
		Version:        "0.1.0",
		Summary:        "A greeting page: the smallest fedhost app",
		Serves:         []string{"hello"},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, &hello{image: "docker.io/library/busybox:1.36"})
}
