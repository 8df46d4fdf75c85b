// Command fedhost-resource-local is the instance provider of the embedded default: it runs
// each node spec as a supervised process on this machine, with its own working dir,
// loopback ports, rotated logs and health checks. See README.md.
package main

import (
	"encoding/json"
	"os"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

const settingsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "artifacts_dir": {
      "type": "string",
      "minLength": 1,
      "description": "Directory of the binaries nodes may run, by name (artifact.binary). Default: ../artifacts beside the directory of the plugin binary (bin/artifacts for bin/plugins)."
    },
    "port_range": {
      "type": "string",
      "pattern": "^[0-9]{1,5}-[0-9]{1,5}$",
      "description": "Loopback ports the provider allocates, as LOW-HIGH. Default 20000-29999."
    },
    "log_max_bytes": {
      "type": "integer",
      "minimum": 4096,
      "description": "Size at which a node's stdout.log or stderr.log is rotated. Default 10485760 (10 MiB)."
    },
    "log_keep": {
      "type": "integer",
      "minimum": 1,
      "maximum": 100,
      "description": "Rotated log files kept per stream. Default 3."
    }
  },
  "additionalProperties": false
}`

func main() {
	if len(os.Args) > 1 && os.Args[1] == launchArg {
		launch(os.Args[2:])
	}
	p := newProvider()
	resource.Serve(sdk.Description{
		Name:           "local",
		Version:        "0.1.0",
		Summary:        "Runs instances as supervised local processes with their own working dir, loopback ports and health checks",
		Serves:         []string{contract.Instance},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, p)
	// Serve returns when the host stops the plugin gracefully (a clean stop of fedhost):
	// the nodes stop with it, as the managed servers they use stop with their plugins.
	p.shutdown()
}
