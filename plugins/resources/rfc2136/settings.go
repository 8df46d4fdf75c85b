package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "primary": {"type": "string", "minLength": 1, "maxLength": 300, "description": "host:port of the primary BIND server, which takes the dynamic updates"},
    "servers": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 300}, "maxItems": 16, "description": "host:port of every authoritative server that must answer a change before a call returns; default the primary alone"},
    "update_server": {"type": "string", "minLength": 1, "maxLength": 300, "description": "host:port handed to deployments for their own updates, if not primary"},
    "nameservers": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 253}, "minItems": 1, "maxItems": 16, "description": "Names of the authoritative servers, the zone's NS records: operators delegate their domain to them"},
    "contact": {"type": "string", "minLength": 1, "maxLength": 253, "description": "The SOA's mailbox as a domain name (hostmaster.example.net); default hostmaster under the first nameserver's parent"},
    "rndc": {
      "type": "object",
      "properties": {
        "address": {"type": "string", "minLength": 1, "maxLength": 253, "description": "Address of the primary's control channel (controls inet ...)"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Port of the control channel; default 953"},
        "key_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File with the control channel's key statement (rndc-confgen -a writes one)"},
        "binary": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "The rndc program; default rndc on PATH"}
      },
      "required": ["address", "key_file"],
      "additionalProperties": false
    },
    "keys_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File the plugin owns with one TSIG key per zone; the primary's named.conf includes it"},
    "zones_directory": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Directory of the primary where the plugin writes each new zone's first file and named keeps its journal"},
    "ttl": {"type": "integer", "minimum": 30, "maximum": 604800, "description": "TTL of records that give none; default 300"},
    "wait_seconds": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "How long a call waits for every server to answer a change; default 60"}
  },
  "required": ["primary", "nameservers", "rndc", "keys_file", "zones_directory"],
  "additionalProperties": false
}`)

type settings struct {
	Primary      string   `json:"primary"`
	Servers      []string `json:"servers"`
	UpdateServer string   `json:"update_server"`
	Nameservers  []string `json:"nameservers"`
	Contact      string   `json:"contact"`
	RNDC         struct {
		Address string `json:"address"`
		Port    int    `json:"port"`
		KeyFile string `json:"key_file"`
		Binary  string `json:"binary"`
	} `json:"rndc"`
	KeysFile       string `json:"keys_file"`
	ZonesDirectory string `json:"zones_directory"`
	TTL            int    `json:"ttl"`
	WaitSeconds    int    `json:"wait_seconds"`
}

// config is the checked settings.
type config struct {
	primary, updateServer string
	servers               []string
	nameservers           []string // fully qualified
	contact               string   // fully qualified
	rndc                  rndc
	keysFile, zonesDir    string
	ttl                   uint32
	wait                  time.Duration
}

// Configure checks the settings. It does not reach the servers: one that is down now is
// reported by the first call that needs it.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return sdk.Invalid("settings", "settings are not an object of the settings schema: %v", err)
	}
	c, err := s.config()
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.cfg = c
	p.mu.Unlock()
	hclog.Default().Info("using BIND servers", "primary", c.primary, "servers", c.servers, "rndc", c.rndc.server)
	return nil
}

func (s settings) config() (*config, error) {
	c := &config{ttl: 300, wait: 60 * time.Second}
	if err := checkHostPort("settings/primary", s.Primary); err != nil {
		return nil, err
	}
	c.primary = s.Primary
	c.servers = []string{s.Primary}
	if len(s.Servers) > 0 {
		c.servers = nil
		for i, srv := range s.Servers {
			if err := checkHostPort(fmt.Sprintf("settings/servers/%d", i), srv); err != nil {
				return nil, err
			}
			c.servers = append(c.servers, srv)
		}
	}
	c.updateServer = c.primary
	if s.UpdateServer != "" {
		if err := checkHostPort("settings/update_server", s.UpdateServer); err != nil {
			return nil, err
		}
		c.updateServer = s.UpdateServer
	}
	if len(s.Nameservers) == 0 {
		return nil, sdk.Invalid("settings/nameservers", "give the names of the authoritative servers (ns1.example.net, say): they are the zones' NS records")
	}
	for i, ns := range s.Nameservers {
		name := strings.TrimSuffix(strings.ToLower(ns), ".")
		if !validDomain(name, 2) {
			return nil, sdk.Invalid(fmt.Sprintf("settings/nameservers/%d", i), "not a host name with at least two labels (ns1.example.net, say)")
		}
		c.nameservers = append(c.nameservers, name+".")
	}
	c.contact = s.Contact
	if c.contact == "" {
		first := strings.TrimSuffix(c.nameservers[0], ".")
		c.contact = "hostmaster." + first[strings.Index(first, ".")+1:]
	}
	c.contact = strings.TrimSuffix(strings.ToLower(c.contact), ".")
	if !validDomain(c.contact, 2) {
		return nil, sdk.Invalid("settings/contact", "not a mailbox written as a domain name (hostmaster.example.net for hostmaster@example.net)")
	}
	c.contact += "."
	if s.RNDC.Address == "" || s.RNDC.KeyFile == "" {
		return nil, sdk.Invalid("settings/rndc", "give the primary's control channel: address and key_file (and port, if not 953)")
	}
	port := 953
	if s.RNDC.Port != 0 {
		port = s.RNDC.Port
	}
	r, err := newRNDC(s.RNDC.Binary, s.RNDC.Address, port, s.RNDC.KeyFile)
	if err != nil {
		return nil, err
	}
	c.rndc = r
	if !filepath.IsAbs(s.KeysFile) {
		return nil, sdk.Invalid("settings/keys_file", "give an absolute path, the one the primary's named.conf includes")
	}
	c.keysFile = s.KeysFile
	if !filepath.IsAbs(s.ZonesDirectory) {
		return nil, sdk.Invalid("settings/zones_directory", "give an absolute path of a directory on the primary")
	}
	if fi, err := os.Stat(s.ZonesDirectory); err != nil || !fi.IsDir() {
		return nil, sdk.Invalid("settings/zones_directory", "%s is not a directory: create it, writable by the plugin and by named", s.ZonesDirectory)
	}
	c.zonesDir = s.ZonesDirectory
	if s.TTL != 0 {
		if s.TTL < 30 || s.TTL > 604800 {
			return nil, sdk.Invalid("settings/ttl", "give a TTL from 30 to 604800 seconds")
		}
		c.ttl = uint32(s.TTL)
	}
	if s.WaitSeconds != 0 {
		if s.WaitSeconds < 1 || s.WaitSeconds > 3600 {
			return nil, sdk.Invalid("settings/wait_seconds", "give from 1 to 3600 seconds")
		}
		c.wait = time.Duration(s.WaitSeconds) * time.Second
	}
	return c, nil
}

func checkHostPort(field, v string) error {
	host, portText, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		return sdk.Invalid(field, "not host:port (192.0.2.53:53, say)")
	}
	if port, err := strconv.Atoi(portText); err != nil || port < 1 || port > 65535 {
		return sdk.Invalid(field, "the port is not a number from 1 to 65535")
	}
	return nil
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// validDomain reports whether name (lower case, no trailing dot) is a host name of at
// least minLabels labels and at most 253 characters.
func validDomain(name string, minLabels int) bool {
	if len(name) > 253 {
		return false
	}
	labels := strings.Split(name, ".")
	if len(labels) < minLabels {
		return false
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return false
		}
	}
	return true
}
