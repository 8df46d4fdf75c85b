package main

import (
	"encoding/json"
	"net"
	"path/filepath"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "managed": {"type": "boolean", "description": "Run Caddy as the plugin's child, with its files in the plugin's data dir; the default when admin_socket is unset"},
    "binary": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "caddy executable for managed; default bin/artifacts/caddy beside the plugin directory, then PATH"},
    "admin_socket": {"type": "string", "minLength": 1, "maxLength": 104, "description": "Unix socket of the admin API of a Caddy already running (not managed); the plugin owns that Caddy's configuration"},
    "listen": {"type": "string", "maxLength": 253, "description": "Address the front door binds, an IP address or host name; default all addresses"},
    "https_port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Port of HTTPS; default 443"},
    "http_port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Port of plain HTTP and of the redirects to HTTPS; default 80"}
  },
  "additionalProperties": false
}`)

const (
	defaultHTTPSPort = 443
	defaultHTTPPort  = 80
	// maxSocketPath is below sun_path (108 bytes on Linux) with room for the NUL.
	maxSocketPath = 104
)

type settings struct {
	Managed     *bool  `json:"managed"`
	Binary      string `json:"binary"`
	AdminSocket string `json:"admin_socket"`
	Listen      string `json:"listen"`
	HTTPSPort   int    `json:"https_port"`
	HTTPPort    int    `json:"http_port"`
}

// parseSettings reads and checks the settings, filling in the defaults.
func parseSettings(raw json.RawMessage) (settings, error) {
	var s settings
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &s); err != nil {
			return s, sdk.Invalid("settings", "settings are not an object of the settings schema: %v", err)
		}
	}
	managed := s.AdminSocket == ""
	if s.Managed != nil {
		managed = *s.Managed
	}
	s.Managed = &managed
	switch {
	case managed && s.AdminSocket != "":
		return s, sdk.Invalid("settings/admin_socket", "managed runs the plugin's own Caddy on a socket in its data dir: drop managed or admin_socket")
	case !managed && s.AdminSocket == "":
		return s, sdk.Invalid("settings/admin_socket", "without managed the plugin needs the admin socket of a running Caddy: set admin_socket, or managed")
	case !managed && s.Binary != "":
		return s, sdk.Invalid("settings/binary", "binary is for the managed Caddy: drop it, or set managed")
	case s.AdminSocket != "" && (len(s.AdminSocket) > maxSocketPath || !filepath.IsAbs(s.AdminSocket)):
		return s, sdk.Invalid("settings/admin_socket", "give an absolute path of at most %d bytes", maxSocketPath)
	case s.Listen != "" && net.ParseIP(s.Listen) == nil && !validHost(s.Listen):
		return s, sdk.Invalid("settings/listen", "give an IP address or a host name, without a port (the ports are https_port and http_port)")
	case s.HTTPSPort < 0 || s.HTTPSPort > 65535:
		return s, sdk.Invalid("settings/https_port", "give a port from 1 to 65535")
	case s.HTTPPort < 0 || s.HTTPPort > 65535:
		return s, sdk.Invalid("settings/http_port", "give a port from 1 to 65535")
	}
	if s.HTTPSPort == 0 {
		s.HTTPSPort = defaultHTTPSPort
	}
	if s.HTTPPort == 0 {
		s.HTTPPort = defaultHTTPPort
	}
	if s.HTTPSPort == s.HTTPPort {
		return s, sdk.Invalid("settings/http_port", "http_port and https_port must differ")
	}
	return s, nil
}
