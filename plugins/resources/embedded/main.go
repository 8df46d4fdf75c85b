// Command fedhost-resource-embedded is the embedded secret provider: secret files
// encrypted at rest with age in the plugin's own data directory, with versions.
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
    "dir": {"type": "string", "minLength": 1, "description": "Directory of the age key file and the encrypted secrets; the plugin's data directory when unset"}
  },
  "additionalProperties": false
}`

func main() {
	resource.Serve(sdk.Description{
		Name:           "embedded",
		Version:        "0.1.0",
		Summary:        "Secret files encrypted at rest with age in the plugin's data directory",
		Serves:         []string{"secret"},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, &provider{})
}
