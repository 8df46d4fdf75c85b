// Command fedhost-resource-localca is the local certificate authority for the tls
// resource: a CA of the host kept in the plugin's data directory, which issues
// certificates for the names a tls request asks for.
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
    "dir": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Directory of the CA's key, its root certificate and the issued certificates; the plugin's data directory when unset"}
  },
  "additionalProperties": false
}`

func main() {
	resource.Serve(sdk.Description{
		Name:           "localca",
		Version:        "0.1.0",
		Summary:        "Certificates from a certificate authority of the host, kept in the plugin's data directory",
		Serves:         []string{"tls"},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, newProvider())
}
