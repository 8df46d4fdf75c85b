package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strings"

	"github.com/go-ldap/ldap/v3"
	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "maxLength": 512, "description": "ldap:// or ldaps:// URL of the shared slapd (ldaps verifies the server's certificate against the system's roots)"},
    "base_dn": {"type": "string", "minLength": 1, "maxLength": 512, "description": "Suffix under which each deployment gets ou=<deployment>; its entry must exist"},
    "admin_dn": {"type": "string", "minLength": 1, "maxLength": 512, "description": "DN the plugin binds as: the database's root DN, or one the access rules let write under base_dn"},
    "admin_password_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File holding admin_dn's password (never the password itself in the settings)"},
    "public_url": {"type": "string", "minLength": 1, "maxLength": 512, "description": "URL handed to applications, if not url"},
    "managed": {"type": "boolean", "description": "Run slapd from the plugin's data dir on 127.0.0.1 (the embedded default) instead of using a shared server: then set none of url, base_dn, admin_dn, admin_password_file"}
  },
  "additionalProperties": false
}`)

type settings struct {
	URL               string `json:"url"`
	BaseDN            string `json:"base_dn"`
	AdminDN           string `json:"admin_dn"`
	AdminPasswordFile string `json:"admin_password_file"`
	PublicURL         string `json:"public_url"`
	Managed           bool   `json:"managed"`
}

// Configure takes the settings. It does not reach the server: a server that is down now
// is reported by the first call that needs it.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return sdk.Invalid("settings", "settings are not an object: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var d *directory
	var err error
	if s.Managed {
		d, err = p.managedDirectory(s)
	} else {
		d, err = s.directory()
	}
	if err != nil {
		return err
	}
	if !s.Managed && p.proc != nil {
		p.proc.Stop() // the settings moved to a shared server
		p.proc = nil
	}
	p.dir = d
	hclog.Default().Info("using a shared OpenLDAP directory", "url", d.url, "base_dn", d.base, "admin_dn", d.adminDN)
	return nil
}

// directory checks the settings and returns the directory they describe.
func (s settings) directory() (*directory, error) {
	if s.URL == "" {
		return nil, sdk.Invalid("settings/url", "set the URL of the shared slapd, or managed to have the plugin run one")
	}
	if !validURL(s.URL) {
		return nil, sdk.Invalid("settings/url", urlHelp)
	}
	public := s.URL
	if s.PublicURL != "" {
		if !validURL(s.PublicURL) {
			return nil, sdk.Invalid("settings/public_url", urlHelp)
		}
		public = s.PublicURL
	}
	base, err := ldap.ParseDN(s.BaseDN)
	if err != nil || len(base.RDNs) == 0 || len(s.BaseDN) > 512 {
		return nil, sdk.Invalid("settings/base_dn", "not a DN such as dc=example,dc=org")
	}
	if _, err := ldap.ParseDN(s.AdminDN); err != nil || s.AdminDN == "" || len(s.AdminDN) > 512 {
		return nil, sdk.Invalid("settings/admin_dn", "not a DN such as cn=admin,dc=example,dc=org")
	}
	if s.AdminPasswordFile == "" {
		return nil, sdk.Invalid("settings/admin_password_file", "set the file that holds admin_dn's password")
	}
	b, err := os.ReadFile(s.AdminPasswordFile)
	if err != nil {
		return nil, sdk.Invalid("settings/admin_password_file", "reading the admin password: %v", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return nil, sdk.Invalid("settings/admin_password_file", "%s is empty: write admin_dn's password into it", s.AdminPasswordFile)
	}
	return &directory{url: s.URL, publicURL: public, base: s.BaseDN, adminDN: s.AdminDN, adminPassword: pw}, nil
}

const urlHelp = "not an ldap:// or ldaps:// URL with a host, such as ldaps://ldap.example.org/"

func validURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Host != "" && (u.Scheme == "ldap" || u.Scheme == "ldaps") && len(raw) <= 512
}
