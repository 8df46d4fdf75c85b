package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "listen": {"type": "string", "minLength": 1, "maxLength": 300, "description": "host:port of the plain-HTTP listener the front door routes each issuer to; with port 0 (the default 127.0.0.1:0) a port is chosen at first start and kept in the data dir"},
    "trusted_proxies": {"type": "array", "maxItems": 100, "items": {"type": "string", "minLength": 1, "maxLength": 64}, "description": "Addresses or CIDR prefixes of the proxies whose X-Forwarded-For and X-Forwarded-Host are believed; default loopback"},
    "key_rotation": {"type": "string", "minLength": 1, "maxLength": 32, "description": "How long a signing key signs before a new one takes over, a Go duration; default 720h (30 days)"},
    "dir": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Directory of the clients, keys and port; the plugin's data directory when unset"}
  },
  "additionalProperties": false
}`)

type settings struct {
	Listen         string   `json:"listen"`
	TrustedProxies []string `json:"trusted_proxies"`
	KeyRotation    string   `json:"key_rotation"`
	Dir            string   `json:"dir"`
}

// config is the settings, checked.
type config struct {
	listen   string
	trusted  []netip.Prefix
	rotation time.Duration
	dir      string
}

const (
	defaultListen   = "127.0.0.1:0"
	defaultRotation = 30 * 24 * time.Hour
)

func parseSettings(raw json.RawMessage) (config, error) {
	var s settings
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return config{}, sdk.Invalid("settings", "not an object of listen, trusted_proxies, key_rotation and dir")
		}
	}
	c := config{listen: defaultListen, rotation: defaultRotation, dir: s.Dir}
	if s.Listen != "" {
		host, port, err := net.SplitHostPort(s.Listen)
		if err != nil || len(s.Listen) > 300 {
			return config{}, sdk.Invalid("settings/listen", "not host:port, such as 127.0.0.1:8490 (port 0 has a port chosen and kept)")
		}
		if _, err := net.LookupPort("tcp", port); err != nil || host == "" {
			return config{}, sdk.Invalid("settings/listen", "not host:port with a numeric port and a host, such as 127.0.0.1:8490")
		}
		c.listen = s.Listen
	}
	if s.TrustedProxies == nil {
		c.trusted = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	if len(s.TrustedProxies) > 100 {
		return config{}, sdk.Invalid("settings/trusted_proxies", "at most 100 entries")
	}
	for i, t := range s.TrustedProxies {
		p, err := parsePrefix(t)
		if err != nil {
			return config{}, sdk.Invalid("settings/trusted_proxies/"+strconv.Itoa(i), "not an IP address or CIDR prefix, such as 10.0.0.0/8")
		}
		c.trusted = append(c.trusted, p)
	}
	if s.KeyRotation != "" {
		d, err := time.ParseDuration(s.KeyRotation)
		if err != nil || d < time.Second || d > 8760*time.Hour {
			return config{}, sdk.Invalid("settings/key_rotation", "not a duration from 1s to 8760h, such as 720h")
		}
		c.rotation = d
	}
	if c.dir == "" {
		c.dir = sdk.DataDir()
	}
	if c.dir == "" {
		return config{}, sdk.Invalid("settings/dir", "the host gave no data directory: set dir to where the clients and keys are kept")
	}
	return c, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}
