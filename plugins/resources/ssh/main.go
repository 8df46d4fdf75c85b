// Command fedhost-resource-ssh is an instance driver: it runs each node spec as a
// supervised process on an existing machine reached by SSH, with its own working dir,
// files written 0600, ports of that machine and health checks from the host. See
// README.md.
package main

import (
	"encoding/json"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

const settingsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["machines", "private_key_file"],
  "properties": {
    "machines": {
      "type": "array",
      "minItems": 1,
      "maxItems": 256,
      "description": "The machines nodes run on; a node goes to one of them by a stable hash of tenant/instance.",
      "items": {
        "type": "object",
        "required": ["name", "address", "user", "host_key", "artifacts_dir", "work_dir", "listen_host"],
        "properties": {
          "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,62}$", "description": "The machine's name in errors and results."},
          "address": {"type": "string", "minLength": 3, "maxLength": 255, "description": "host:port of its SSH server."},
          "user": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The user nodes run as."},
          "host_key": {"type": "string", "minLength": 16, "maxLength": 16384, "description": "Its pinned SSH host public key, in authorized_keys format (a line of its /etc/ssh/ssh_host_*_key.pub)."},
          "artifacts_dir": {"type": "string", "pattern": "^/", "maxLength": 1024, "description": "Absolute directory on the machine of the binaries nodes run, by name (artifact.binary)."},
          "work_dir": {"type": "string", "pattern": "^/", "maxLength": 1024, "description": "Absolute directory on the machine below which each node has <tenant>/<instance>."},
          "listen_host": {"type": "string", "minLength": 1, "maxLength": 255, "description": "The address nodes listen on (${host}) and the host reaches them at."}
        },
        "additionalProperties": false
      }
    },
    "private_key_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "A file on the fedhost machine holding the unencrypted SSH private key the driver logs in with."},
    "connect_timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 300, "description": "How long connecting and the SSH handshake may take. Default 10."}
  },
  "additionalProperties": false
}`

func main() {
	p := newProvider()
	defer p.closeAll()
	resource.Serve(sdk.Description{
		Name:           "ssh",
		Version:        "0.1.0",
		Summary:        "Runs instances as supervised processes on existing machines reached by SSH, with pinned host keys and health checks from the host",
		Serves:         []string{contract.Instance},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, p)
}
