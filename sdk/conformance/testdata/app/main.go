// Command app is the app the tests of conformance.App run against: sound as built, and
// broken in one way when built with -ldflags "-X main.variant=NAME".
package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

// variant selects the defect: notjson, badschema, baddefault, unknowntype, emptyartifact
// or misc (placeholders, renames, operations and role groups); empty for none.
var variant string

const goodSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "title": {"type": "string", "title": "Site title", "default": "My site", "maxLength": 20, "x-order": 1},
    "admin": {
      "type": "object",
      "title": "Administrator",
      "default": {},
      "required": ["email"],
      "properties": {
        "email": {"type": "string", "format": "email", "default": "admin@example.org", "x-widget": "email"},
        "password": {"type": "string", "writeOnly": true, "minLength": 8}
      }
    },
    "theme": {"enum": ["light", "dark"], "default": "light", "x-enumTitles": ["Light", "Dark"]},
    "links": {"type": "array", "items": {"$ref": "#/$defs/link"}, "default": []}
  },
  "required": ["admin"],
  "additionalProperties": false,
  "$defs": {
    "link": {
      "type": "object",
      "required": ["url"],
      "properties": {
        "url": {"type": "string", "format": "uri"},
        "label": {"type": "string", "default": "Link", "minLength": 1}
      }
    }
  }
}`

type config struct {
	Title string `json:"title"`
	Admin struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	} `json:"admin"`
}

type testApp struct{}

func (testApp) Schema(context.Context) (app.Schema, error) {
	s := goodSchema
	switch variant {
	case "notjson":
		s = `{"type": "object",`
	case "badschema":
		s = strings.Replace(s, `"theme": {"enum"`, `"theme": {"type": "colour", "enum"`, 1)
	case "baddefault":
		s = strings.Replace(s, `"default": "Link"`, `"default": ""`, 1)
	}
	return app.Schema{JSON: json.RawMessage(s)}, nil
}

func (testApp) Requests(_ context.Context, req app.RequestsRequest) ([]app.ResourceRequest, error) {
	db := "postgresql"
	if variant == "unknowntype" {
		db = "postgres"
	}
	reqs := []app.ResourceRequest{
		{Name: "admin", Type: "secret", Spec: json.RawMessage(`{"files":{"password":{"generate":{"length":24}}}}`)},
		{Name: "db", Type: db, Spec: json.RawMessage(`{}`), DependsOn: []string{"admin"}},
	}
	if variant == "route" {
		reqs = append(reqs, app.ResourceRequest{Name: "web", Type: "route", Spec: json.RawMessage(`{"hosts":["site.example.org"],"upstream":"127.0.0.1:1"}`)})
	}
	return reqs, nil
}

func (testApp) Render(_ context.Context, req app.RenderRequest) ([]app.Node, error) {
	var c config
	if err := json.Unmarshal(req.Config, &c); err != nil {
		return nil, sdk.Invalid("config", "%v", err)
	}
	var db struct {
		Password struct {
			Secret string `json:"secret"`
		} `json:"password"`
	}
	if err := json.Unmarshal(req.Results["db"], &db); err != nil {
		return nil, sdk.Invalid("results/db", "%v", err)
	}
	spec := map[string]any{
		"artifact": map[string]any{"binary": "site"},
		"env": map[string]string{
			"LISTEN": "${host}:${port:http}", "TITLE": c.Title, "ADMIN_EMAIL": c.Admin.Email,
			"DB_PASSWORD_FILE": "${file:db-password}",
		},
		"files":  map[string]any{"db-password": map[string]string{"content": "${secret:" + db.Password.Secret + "}"}},
		"ports":  []map[string]string{{"name": "http", "protocol": "http"}},
		"health": map[string]string{"port": "http", "http_path": "/"},
	}
	if c.Admin.Password != "" {
		spec["files"].(map[string]any)["admin-password"] = map[string]string{"content": c.Admin.Password}
	}
	switch variant {
	case "emptyartifact":
		spec["artifact"] = map[string]any{}
	case "misc":
		spec["env"].(map[string]string)["DB_PASSWORD"] = "${secret:" + db.Password.Secret + "}"
		spec["env"].(map[string]string)["BASE"] = "${url:web}"
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return []app.Node{{Name: "web", Spec: b}}, nil
}

func (testApp) Renames(context.Context) ([]app.Rename, error) {
	if variant == "misc" {
		return []app.Rename{{From: "/a", To: "/b", Since: "0.2.0"}, {From: "/b", To: "/a", Since: "0.3.0"}, {From: "name", To: "/title", Since: "0.4.0"}}, nil
	}
	return []app.Rename{{From: "/siteTitle", To: "/title", Since: "0.2.0"}}, nil
}

func (testApp) Operations(context.Context) ([]app.Operation, error) {
	if variant == "misc" {
		return []app.Operation{{Name: "Backup Now"}}, nil
	}
	return []app.Operation{{Name: "backup", Description: "Dump the database"}}, nil
}

func (testApp) RoleGroups(context.Context) ([]app.RoleGroup, error) {
	if variant == "misc" {
		return []app.RoleGroup{{Name: "admins", Description: "Administrators"}}, nil
	}
	return []app.RoleGroup{{Name: "admins", Description: "Administrators", Roles: []string{"admin"}}}, nil
}

func main() {
	app.Serve(sdk.Description{Name: "test", Version: "0.1.0", Summary: "The app of conformance.App's tests", Serves: []string{"test"}}, testApp{})
}
