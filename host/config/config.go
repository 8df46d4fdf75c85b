package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// DefaultFile is the configuration file read when no path is given and it exists.
const DefaultFile = "fedhost.hcl"

// Config is the merged configuration of a fedhost process.
type Config struct {
	// Listen is the host:port the HTTP server listens on.
	Listen string
	// DataDir holds the SQLite database, secrets key, managed services and builds.
	DataDir string
	// Database is "sqlite" (a file in DataDir) or a postgres:// or postgresql:// URL.
	// It may hold a password: never log or print it.
	Database string
	// PluginDir is the directory the plugin manager loads plugins from.
	PluginDir string
	// LogLevel is one of trace, debug, info, warn, error.
	LogLevel string
	// LogFormat is "text" or "json".
	LogFormat string
	// AuditRetentionDays is how many days audit events are kept ("0" keeps all).
	AuditRetentionDays string
	// PasswordLinkDays is how many days an invitation or reset link of a deployment's
	// user works.
	PasswordLinkDays string
	// UpdateCheckInterval is how often the update policies are evaluated (a duration).
	UpdateCheckInterval string
	// BackupSchedule is when each app's data is backed up (a cron spec, in UTC unless
	// it starts with CRON_TZ=); BackupKeepWithin how long its backups are kept (restic's
	// --keep-within). The backups blocks change both per app.
	BackupSchedule   string
	BackupKeepWithin string
	// Backups holds the backups blocks: an app's schedule and retention, by app name.
	Backups map[string]AppBackups
	// BuildLogRetentionDays is how many days the logs of finished builds are kept ("0"
	// keeps all).
	BuildLogRetentionDays string
	// ReadTimeout, WriteTimeout and IdleTimeout bound reading a request, writing an
	// answer (a build's event stream extends it at each write) and a kept-alive
	// connection's wait for its next request (durations).
	ReadTimeout  string
	WriteTimeout string
	IdleTimeout  string
	// TrustedProxies lists, comma-separated, the addresses (IPs or CIDRs) of the reverse
	// proxies whose X-Forwarded-Proto and X-Real-IP headers are believed; "" trusts none.
	TrustedProxies string
	// MaxDeploymentsPerOperator is how many deployments an operator who is not a
	// superuser may hold, destroyed ones not counted ("0" sets no limit).
	MaxDeploymentsPerOperator string
	// FrontDoorAddresses lists, comma-separated, the public IPs of the front door (the
	// route provider): each app's host name gets A and AAAA records to them.
	FrontDoorAddresses string
	// FrontDoorHTTPSPort and FrontDoorHTTPPort are the ports the route provider serves
	// HTTPS and plain HTTP on; a port other than the scheme's own is part of app URLs.
	FrontDoorHTTPSPort string
	FrontDoorHTTPPort  string
	// SuggestedDomain is the domain offered for a new deployment; {namespace} in it
	// stands for the deployment's namespace. Empty offers none.
	SuggestedDomain string
	// PublicURL is the address people and other fedhosts reach this one at (scheme and
	// host, no path): the source URL of a migration string and the links mailed to a
	// deployment's users. Empty takes each request's own address (PublicBase).
	PublicURL string
	// Metrics says who may read GET /metrics: "off", "loopback" (peers on this machine)
	// or "token" (a bearer token, the contents of MetricsTokenFile: read it with
	// MetricsToken).
	Metrics          string
	MetricsTokenFile string
	// DomainDelegationResolver is the resolver (host or host:port; port 53 when none)
	// asked whether an operator's own domain is delegated to the provider's nameservers;
	// "" asks the first of /etc/resolv.conf.
	DomainDelegationResolver string
	// DomainPendingFollow is how long a build follows a registration the registry keeps
	// pending before it fails unavailable, the next build following on (a duration).
	DomainPendingFollow string
	// DomainSnapshotInterval is how often each registrar's account is listed, and its
	// domains due within 30 days renewed (a duration).
	DomainSnapshotInterval string
	// Resources lists, per resource type, the provider that answers it.
	Resources []Resource
	// Registrars lists the registrar drivers in use.
	Registrars []Registrar
	// Apps holds the app blocks: the settings of app plugins, by app name.
	Apps []App
	// OperatorOIDC lets operators log in with an OpenID provider; nil when not configured.
	OperatorOIDC *OperatorOIDC
	// File is the configuration file that was read, or "" when none was.
	File string

	// sources maps a setting name to where its value came from, for error messages.
	sources map[string]string
}

// AppBackups is a backups block: one app's schedule and retention; empty fields take
// backup_schedule and backup_keep_within.
type AppBackups struct {
	Schedule   string
	KeepWithin string
}

// BackupPolicy returns the schedule and retention of an app's backups.
func (c *Config) BackupPolicy(app string) (schedule, keepWithin string) {
	schedule, keepWithin = c.BackupSchedule, c.BackupKeepWithin
	if b, ok := c.Backups[app]; ok {
		if b.Schedule != "" {
			schedule = b.Schedule
		}
		if b.KeepWithin != "" {
			keepWithin = b.KeepWithin
		}
	}
	return schedule, keepWithin
}

// Resource is a resource block: which provider plugin answers a resource type.
type Resource struct {
	// Type is a resource type, e.g. "postgresql".
	Type string
	// Provider names the provider plugin, e.g. "versitygw".
	Provider string
	// Settings is the provider's settings as a JSON object ("{}" when none).
	Settings json.RawMessage
	// Limits is a JSON object of numbers ("{}" when none).
	Limits json.RawMessage
}

// Registrar is a registrar block: a registrar driver and its settings.
type Registrar struct {
	// Name names the registrar driver plugin, e.g. "porkbun".
	Name string
	// Settings is the driver's settings as a JSON object ("{}" when none).
	Settings json.RawMessage
}

// App is an app block: the settings of an app plugin, the same for every deployment and
// every installed version of the app.
type App struct {
	// Name names the app, e.g. "hello".
	Name string
	// Settings is the plugin's settings as a JSON object ("{}" when none).
	Settings json.RawMessage
}

// OperatorOIDC is the operator_oidc block: operators may also log in with this OpenID
// Connect provider. The client secret stays in its own file, never in fedhost.hcl.
type OperatorOIDC struct {
	// Issuer is the provider's https URL, whose discovery document fedhost reads.
	Issuer   string
	ClientID string
	// ClientSecretFile holds the client secret; read it with ClientSecret.
	ClientSecretFile string
	// RedirectURL is fedhost's https://.../login/oidc/callback as registered with the provider.
	RedirectURL string
	// UsernameClaim is the ID token claim that holds the fedhost user name.
	UsernameClaim string
	// SuperuserGroup, when set, makes members of the groups claim superusers and
	// everyone else not.
	SuperuserGroup string
	// CreateUsers lets an unknown user in by creating the account; without it only
	// existing accounts may log in.
	CreateUsers bool
	// ButtonLabel is the text of the log-in page's button.
	ButtonLabel string
}

// Defaults of the operator_oidc block.
const (
	DefaultUsernameClaim = "preferred_username"
	DefaultButtonLabel   = "Log in with single sign-on"
)

// ClientSecret reads the client secret from ClientSecretFile, without the surrounding
// white space a trailing newline leaves. Never log or print it.
func (o *OperatorOIDC) ClientSecret() (string, error) {
	b, err := os.ReadFile(o.ClientSecretFile)
	if err != nil {
		return "", fmt.Errorf("%w; put the client secret in that file, readable by the user fedhost runs as", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s is empty; write the client secret the OpenID provider gave fedhost into it", o.ClientSecretFile)
	}
	return secret, nil
}

// The values of the metrics setting.
const (
	MetricsOff      = "off"
	MetricsLoopback = "loopback"
	MetricsToken    = "token"
)

// MetricsBearer reads the bearer token of GET /metrics from MetricsTokenFile, without
// the surrounding white space. Never log or print it.
func (c *Config) MetricsBearer() (string, error) {
	if c.MetricsTokenFile == "" {
		return "", errors.New(`is empty; with metrics = "token", name the file that holds the token scrapers send, readable by fedhost only`)
	}
	b, err := os.ReadFile(c.MetricsTokenFile)
	if err != nil {
		return "", fmt.Errorf("%w; put the token scrapers send in that file, readable by the user fedhost runs as", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", fmt.Errorf("%s holds fewer than 16 characters; write a long random token into it, e.g. from openssl rand -hex 32", c.MetricsTokenFile)
	}
	return token, nil
}

// Default returns the embedded default: one machine, SQLite, embedded secrets, local
// instances, and PostgreSQL and S3 services managed in the data directory.
func Default() *Config {
	return &Config{
		Listen:    "127.0.0.1:8080",
		DataDir:   "./data",
		Database:  "sqlite",
		PluginDir: "bin/plugins",
		LogLevel:  "info",
		LogFormat: "text",

		AuditRetentionDays:    "365",
		PasswordLinkDays:      "7",
		UpdateCheckInterval:   "1m",
		BackupSchedule:        "@daily",
		BackupKeepWithin:      "30d",
		BuildLogRetentionDays: "30",
		ReadTimeout:           "30s",
		WriteTimeout:          "60s",
		IdleTimeout:           "120s",

		MaxDeploymentsPerOperator: "20",
		FrontDoorAddresses:        "127.0.0.1",
		FrontDoorHTTPSPort:        "8443",
		FrontDoorHTTPPort:         "8000",
		SuggestedDomain:           "{namespace}.localhost",
		Metrics:                   MetricsLoopback,
		DomainPendingFollow:       "2m",
		DomainSnapshotInterval:    "24h",
		Resources: []Resource{
			{Type: "postgresql", Provider: "postgresql", Settings: json.RawMessage(`{"managed":true}`), Limits: emptyObject()},
			{Type: "s3", Provider: "versitygw", Settings: json.RawMessage(`{"managed":true}`), Limits: emptyObject()},
			{Type: "secret", Provider: "embedded", Settings: emptyObject(), Limits: emptyObject()},
			{Type: "instance", Provider: "local", Settings: emptyObject(), Limits: json.RawMessage(`{"per_deployment":8}`)},
			{Type: "tls", Provider: "localca", Settings: emptyObject(), Limits: emptyObject()},
			{Type: "route", Provider: "caddy", Settings: json.RawMessage(`{"managed":true,"listen":"127.0.0.1"}`), Limits: emptyObject()},
			{Type: "ldap", Provider: "openldap", Settings: json.RawMessage(`{"managed":true}`), Limits: emptyObject()},
			{Type: "oidc", Provider: "builtin", Settings: emptyObject(), Limits: emptyObject()},
		},
		sources: map[string]string{},
	}
}

// Resource returns the resource block of a resource type.
func (c *Config) Resource(resourceType string) (Resource, bool) {
	for _, r := range c.Resources {
		if r.Type == resourceType {
			return r, true
		}
	}
	return Resource{}, false
}

// Load merges the embedded default, the configuration file, the environment and the
// flags that were set, and validates the result.
//
// The file is the --config flag if set, else FEDHOST_CONFIG, else path; a file named
// by any of them must exist. When none names one, ./fedhost.hcl is read if it exists.
// A file with resource blocks replaces all the default resource blocks; a file without
// any keeps them. lookupEnv is usually os.LookupEnv; lookupEnv and flags may be nil.
func Load(path string, lookupEnv func(string) (string, bool), flags *pflag.FlagSet) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	cfg := Default()

	file, source, fix := configFile(path, lookupEnv, flags)
	if file == "" {
		if _, err := os.Stat(DefaultFile); err == nil {
			file = DefaultFile
		}
	}
	if file != "" {
		src, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) && source != "" {
			return nil, fmt.Errorf("config file %s (%s) does not exist; create it, or %s to run the embedded default", file, source, fix)
		}
		if err != nil {
			return nil, fmt.Errorf("reading config file: %w", err)
		}
		if err := cfg.applyFile(src, file); err != nil {
			return nil, err
		}
		cfg.File = file
	}

	for _, s := range settings {
		if v, ok := lookupEnv(s.env()); ok && v != "" {
			*s.field(cfg) = v
			cfg.sources[s.name] = "env " + s.env()
		}
	}
	if flags != nil {
		for _, s := range settings {
			if f := flags.Lookup(s.flag()); f != nil && f.Changed {
				*s.field(cfg) = f.Value.String()
				cfg.sources[s.name] = "flag --" + s.flag()
			}
		}
	}

	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.fillRouteSettings(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// fillRouteSettings gives the route provider the front door's ports as its https_port
// and http_port settings where its resource block leaves them out, so that one setting
// says where people reach the apps; a block that sets them must agree with
// front_door_https_port and front_door_http_port (a build says so when not).
func (c *Config) fillRouteSettings() error {
	https, http := c.FrontDoorPorts()
	for i, r := range c.Resources {
		if r.Type != "route" {
			continue
		}
		var settings map[string]any
		if err := json.Unmarshal(r.Settings, &settings); err != nil || settings == nil {
			settings = map[string]any{}
		}
		if _, ok := settings["https_port"]; !ok {
			settings["https_port"] = https
		}
		if _, ok := settings["http_port"]; !ok {
			settings["http_port"] = http
		}
		raw, err := json.Marshal(settings)
		if err != nil {
			return fmt.Errorf("resource \"route\" settings: %w", err)
		}
		c.Resources[i].Settings = raw
	}
	return nil
}

// configFile returns the file named by the flag, the environment or path, in this
// order, where the name came from and how to name none instead.
func configFile(path string, lookupEnv func(string) (string, bool), flags *pflag.FlagSet) (file, source, fix string) {
	if flags != nil {
		if f := flags.Lookup(configFlag); f != nil && f.Changed && f.Value.String() != "" {
			return f.Value.String(), "flag --" + configFlag, "drop --" + configFlag
		}
	}
	if v, ok := lookupEnv(configEnv); ok && v != "" {
		return v, "env " + configEnv, "unset " + configEnv
	}
	if path != "" {
		return path, "named by the caller", "name no file"
	}
	return "", "", ""
}

func emptyObject() json.RawMessage { return json.RawMessage(`{}`) }

// BuildLogRetention is BuildLogRetentionDays as a duration; 0 keeps all logs.
func (c *Config) BuildLogRetention() time.Duration {
	days, _ := strconv.Atoi(c.BuildLogRetentionDays)
	return time.Duration(days) * 24 * time.Hour
}

// DelegationResolver is DomainDelegationResolver as host:port ("" for the system's).
func (c *Config) DelegationResolver() string {
	r := c.DomainDelegationResolver
	if r == "" {
		return ""
	}
	if _, _, err := net.SplitHostPort(r); err == nil {
		return r
	}
	return net.JoinHostPort(strings.Trim(r, "[]"), "53")
}

// PendingFollow is DomainPendingFollow as a duration.
func (c *Config) PendingFollow() time.Duration {
	d, _ := time.ParseDuration(c.DomainPendingFollow)
	return d
}

// SnapshotInterval is DomainSnapshotInterval as a duration.
func (c *Config) SnapshotInterval() time.Duration {
	d, _ := time.ParseDuration(c.DomainSnapshotInterval)
	return d
}

// PasswordLinkTTL is PasswordLinkDays as a duration.
func (c *Config) PasswordLinkTTL() time.Duration {
	days, _ := strconv.Atoi(c.PasswordLinkDays)
	return time.Duration(days) * 24 * time.Hour
}

// AuditRetention is AuditRetentionDays as a duration; 0 keeps all events.
func (c *Config) AuditRetention() time.Duration {
	days, _ := strconv.Atoi(c.AuditRetentionDays)
	return time.Duration(days) * 24 * time.Hour
}

// Timeouts are ReadTimeout, WriteTimeout and IdleTimeout as durations (validated at load).
func (c *Config) Timeouts() (read, write, idle time.Duration) {
	read, _ = time.ParseDuration(c.ReadTimeout)
	write, _ = time.ParseDuration(c.WriteTimeout)
	idle, _ = time.ParseDuration(c.IdleTimeout)
	return read, write, idle
}

// FrontDoorIPs is FrontDoorAddresses as a list.
func (c *Config) FrontDoorIPs() []string {
	var out []string
	for _, a := range strings.Split(c.FrontDoorAddresses, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// FrontDoorPorts are FrontDoorHTTPSPort and FrontDoorHTTPPort as numbers (validated).
func (c *Config) FrontDoorPorts() (https, http int) {
	https, _ = strconv.Atoi(c.FrontDoorHTTPSPort)
	http, _ = strconv.Atoi(c.FrontDoorHTTPPort)
	return https, http
}

// Proxies is TrustedProxies as a list; empty when none is trusted.
func (c *Config) Proxies() []string {
	var out []string
	for _, p := range strings.Split(c.TrustedProxies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// DeploymentLimit is MaxDeploymentsPerOperator as a number; 0 sets no limit.
func (c *Config) DeploymentLimit() int {
	n, _ := strconv.Atoi(c.MaxDeploymentsPerOperator)
	return n
}

// PublicBase is PublicURL without a trailing slash, "" when it is not set.
func (c *Config) PublicBase() string { return strings.TrimSuffix(c.PublicURL, "/") }
