// Command fedhost-resource-incus is an instance driver: it runs each node spec as an
// Incus container (an OCI application container, or a system container) through the
// Incus REST API, with TLS client certificate authentication, its files written 0600 in
// the instance and its ports as proxy devices on the Incus machine. See README.md.
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
  "required": ["url", "client_cert_file", "client_key_file", "listen_host"],
  "properties": {
    "url": {"type": "string", "pattern": "^https://", "maxLength": 512, "description": "The Incus server's API, https://host:port (its core.https_address)."},
    "client_cert_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "A PEM file on this machine with the client certificate the server trusts (incus config trust add-certificate)."},
    "client_key_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "A PEM file on this machine with that certificate's unencrypted key."},
    "server_cert_file": {"type": "string", "maxLength": 4096, "description": "A PEM file with the server's own certificate, pinned: any other is refused. Give this or ca_file."},
    "ca_file": {"type": "string", "maxLength": 4096, "description": "A PEM file with the CA that signed the server's certificate. Give this or server_cert_file."},
    "project": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", "description": "The Incus project the instances go in. Default default."},
    "profiles": {"type": "array", "maxItems": 16, "items": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"}, "description": "The profiles of every instance. Default [default]."},
    "storage_pool": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", "description": "The pool of the instances' root disks and volumes. Default default."},
    "network": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", "description": "The network of the instances' eth0; empty takes the profiles' network."},
    "listen_host": {"type": "string", "minLength": 2, "maxLength": 64, "description": "The IP address of the Incus machine that nodes' ports listen on (proxy devices) and the host reaches them at."},
    "node_dir": {"type": "string", "pattern": "^/", "maxLength": 256, "description": "The directory in each instance of the node's files. Default /srv/fedhost."},
    "system_image_server": {"type": "string", "pattern": "^https://", "maxLength": 512, "description": "The simplestreams server of images:ALIAS system container images. Default https://images.linuxcontainers.org."},
    "port_range": {"type": "string", "pattern": "^[0-9]{4,5}-[0-9]{4,5}$", "description": "The ports of the Incus machine the nodes' proxy devices listen on, FROM-TO. Default 20000-29999."},
    "operation_timeout_seconds": {"type": "integer", "minimum": 5, "maximum": 3600, "description": "How long one background operation (an image pull, a start) may take. Default 600."}
  },
  "additionalProperties": false
}`

func main() {
	resource.Serve(sdk.Description{
		Name:           "incus",
		Version:        "0.1.0",
		Summary:        "Runs instances as Incus containers (OCI images or system containers) through the Incus REST API, with TLS client certificates, files 0600 in the instance and proxy devices for ports",
		Serves:         []string{contract.Instance},
		SettingsSchema: json.RawMessage(settingsSchema),
	}, newProvider())
}
