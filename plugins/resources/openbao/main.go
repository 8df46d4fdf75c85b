// Command fedhost-resource-openbao is the OpenBao secret provider: secret files kept in
// an OpenBao KV v2 mount, one key per file, under a prefix per tenant and instance.
package main

import (
	"encoding/json"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

const settingsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "address": {"type": "string", "pattern": "^https?://", "description": "OpenBao address, such as https://bao.example.net:8200"},
    "mount": {"type": "string", "minLength": 1, "default": "secret", "description": "Path of the KV v2 mount"},
    "prefix": {"type": "string", "minLength": 1, "default": "fedhost", "description": "Path within the mount under which every tenant's secrets live"},
    "token": {"type": "string", "minLength": 1, "description": "OpenBao token (prefer token_file)"},
    "token_file": {"type": "string", "minLength": 1, "description": "File holding the OpenBao token"}
  },
  "required": ["address"],
  "oneOf": [{"required": ["token"]}, {"required": ["token_file"]}],
  "additionalProperties": false
}`

func main() {
	resource.Serve(sdk.Description{
		Name:           "openbao",
		Version:        "0.1.0",
		Summary:        "Secret files in an OpenBao KV v2 mount, versioned by KV",
		Serves:         []string{"secret"},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, &provider{})
}
