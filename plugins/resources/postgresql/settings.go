package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "managed": {"type": "boolean", "description": "Run a PostgreSQL cluster in the plugin's data dir (the default when no url is set)"},
    "url": {"type": "string", "minLength": 1, "description": "Admin DSN of a shared server; the role needs CREATEROLE and CREATEDB"},
    "url_file": {"type": "string", "minLength": 1, "description": "File holding the admin DSN, instead of url"},
    "host": {"type": "string", "minLength": 1, "description": "Host handed to applications, if not the admin DSN's"},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Port handed to applications, if not the admin DSN's"},
    "sslmode": {"enum": ["disable", "require", "verify-ca", "verify-full"], "description": "sslmode handed to applications; default disable on loopback, else require"},
    "allowed_extensions": {"type": "array", "uniqueItems": true, "items": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,62}$"}, "description": "Extensions a request may ask for"},
    "bin_dir": {"type": "string", "minLength": 1, "description": "Directory of initdb and postgres for the managed cluster"}
  },
  "additionalProperties": false
}`)

var defaultExtensions = []string{"pg_trgm", "hstore", "citext", "unaccent", "uuid-ossp"}

type settings struct {
	Managed           *bool    `json:"managed"`
	URL               string   `json:"url"`
	URLFile           string   `json:"url_file"`
	Host              string   `json:"host"`
	Port              int      `json:"port"`
	SSLMode           string   `json:"sslmode"`
	AllowedExtensions []string `json:"allowed_extensions"`
	BinDir            string   `json:"bin_dir"`
}

// Configure takes the settings: a shared server (url or url_file), or the managed
// cluster, which it starts here so that the first Provision finds it running.
func (p *provider) Configure(ctx context.Context, raw json.RawMessage) error {
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return sdk.Invalid("settings", "settings are not an object: %v", err)
	}
	allowed := defaultExtensions
	if s.AllowedExtensions != nil {
		allowed = s.AllowedExtensions
	}
	dsn, err := s.adminDSN()
	if err != nil {
		return err
	}
	if dsn == "" {
		return p.configureManaged(ctx, s, allowed)
	}
	srv, err := newServer(dsn, s.Host, s.Port, s.SSLMode)
	if err != nil {
		return err
	}
	p.swap(srv, nil, allowed)
	hclog.Default().Info("using a shared PostgreSQL server", "address", srv.address())
	return nil
}

// adminDSN returns the admin DSN of shared mode, or "" for managed mode.
func (s settings) adminDSN() (string, error) {
	switch {
	case s.URL != "" && s.URLFile != "":
		return "", sdk.Invalid("settings/url_file", "set url or url_file, not both")
	case s.URL == "" && s.URLFile == "":
		if s.Managed != nil && !*s.Managed {
			return "", sdk.Invalid("settings/url", "managed is false, so the admin DSN of a shared server is needed: set url or url_file")
		}
		return "", nil
	case s.Managed != nil && *s.Managed:
		return "", sdk.Invalid("settings/managed", "managed runs the plugin's own cluster and takes no url: drop managed or the url")
	case s.BinDir != "":
		return "", sdk.Invalid("settings/bin_dir", "bin_dir is for the managed cluster, and url names a shared server")
	case s.URL != "":
		return s.URL, nil
	}
	b, err := os.ReadFile(s.URLFile)
	if err != nil {
		return "", sdk.Invalid("settings/url_file", "reading the admin DSN: %v", err)
	}
	dsn := strings.TrimSpace(string(b))
	if dsn == "" {
		return "", sdk.Invalid("settings/url_file", "%s is empty: write the admin DSN into it", s.URLFile)
	}
	return dsn, nil
}

// newServer parses an admin DSN. The parse error is not shown: it would quote the DSN,
// password and all.
func newServer(dsn, host string, port int, sslmode string) (*server, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, sdk.Invalid("settings/url", "not a PostgreSQL URL (postgres://user:password@host:port/database) or key=value DSN")
	}
	cfg.MaxConns = 4
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	srv := &server{admin: cfg, host: host, port: port, sslmode: sslmode}
	if srv.host == "" {
		srv.host = cfg.ConnConfig.Host
	}
	if srv.port == 0 {
		srv.port = int(cfg.ConnConfig.Port)
	}
	if srv.sslmode == "" {
		srv.sslmode = "require"
		if ip := net.ParseIP(srv.host); srv.host == "localhost" || strings.HasPrefix(srv.host, "/") || (ip != nil && ip.IsLoopback()) {
			srv.sslmode = "disable"
		}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, sdk.Invalid("settings/url", "cannot use the admin DSN for %s: %s", srv.adminAddress(), redact(err.Error(), cfg.ConnConfig.Password))
	}
	srv.pool = pool
	return srv, nil
}
