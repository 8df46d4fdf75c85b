package config

import (
	"strings"

	"github.com/spf13/pflag"
)

const (
	configFlag = "config"
	configEnv  = "FEDHOST_CONFIG"
)

// setting is one scalar setting; its file attribute, flag and environment variable
// names all derive from name, so they cannot drift apart.
type setting struct {
	name  string
	usage string
	field func(*Config) *string
}

var settings = []setting{
	{"listen", "host:port the HTTP server listens on", func(c *Config) *string { return &c.Listen }},
	{"data_dir", "directory for the SQLite database, secrets and managed services", func(c *Config) *string { return &c.DataDir }},
	{"database", `"sqlite" or a postgres:// URL`, func(c *Config) *string { return &c.Database }},
	{"plugin_dir", "directory the plugins are loaded from", func(c *Config) *string { return &c.PluginDir }},
	{"log_level", "trace, debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }},
	{"log_format", "text or json", func(c *Config) *string { return &c.LogFormat }},
	{"password_link_days", "days an invitation or password reset link of a deployment's user works", func(c *Config) *string { return &c.PasswordLinkDays }},
	{"audit_retention_days", "days audit events are kept; 0 keeps all", func(c *Config) *string { return &c.AuditRetentionDays }},
	{"update_check_interval", "how often update policies are evaluated, a duration such as 1m", func(c *Config) *string { return &c.UpdateCheckInterval }},
	{"backup_schedule", "when apps are backed up: a cron spec such as @daily or 30 3 * * *", func(c *Config) *string { return &c.BackupSchedule }},
	{"backup_keep_within", "how long backups are kept, as restic's --keep-within such as 30d", func(c *Config) *string { return &c.BackupKeepWithin }},
	{"read_timeout", "longest time to read a request, headers and body, a duration such as 30s", func(c *Config) *string { return &c.ReadTimeout }},
	{"write_timeout", "longest time to write an answer (event streams: each write), a duration such as 60s", func(c *Config) *string { return &c.WriteTimeout }},
	{"idle_timeout", "longest wait of a kept-alive connection for its next request, a duration such as 120s", func(c *Config) *string { return &c.IdleTimeout }},
	{"trusted_proxies", "comma-separated IPs or CIDRs of reverse proxies whose X-Forwarded-Proto and X-Real-IP are believed; empty trusts none", func(c *Config) *string { return &c.TrustedProxies }},
	{"max_deployments_per_operator", "deployments an operator (not a superuser) may hold; 0 sets no limit", func(c *Config) *string { return &c.MaxDeploymentsPerOperator }},
	{"build_log_retention_days", "days the logs of finished builds are kept; 0 keeps all", func(c *Config) *string { return &c.BuildLogRetentionDays }},
	{"front_door_addresses", "comma-separated public IPs of the front door (the route provider), published as each app host name's A and AAAA records", func(c *Config) *string { return &c.FrontDoorAddresses }},
	{"front_door_https_port", "the port the front door serves HTTPS on, as the route provider listens: it is in each app's URL unless 443", func(c *Config) *string { return &c.FrontDoorHTTPSPort }},
	{"front_door_http_port", "the port the front door serves plain HTTP on (redirects to HTTPS), as the route provider listens", func(c *Config) *string { return &c.FrontDoorHTTPPort }},
	{"metrics", `who may read GET /metrics: "off", "loopback" (requests from this machine only) or "token" (Authorization: Bearer with the contents of metrics_token_file)`, func(c *Config) *string { return &c.Metrics }},
	{"metrics_token_file", `the file holding the bearer token of GET /metrics when metrics = "token"`, func(c *Config) *string { return &c.MetricsTokenFile }},
	{"domain_delegation_resolver", "the resolver (host or host:port) asked whether an operator's own domain is delegated to the provider's nameservers; empty asks the system's", func(c *Config) *string { return &c.DomainDelegationResolver }},
	{"domain_pending_follow", "how long a build follows a registration the registry keeps pending, a duration such as 2m", func(c *Config) *string { return &c.DomainPendingFollow }},
	{"domain_snapshot_interval", "how often each registrar's account is listed and its domains due within 30 days renewed, a duration such as 24h", func(c *Config) *string { return &c.DomainSnapshotInterval }},
	{"public_url", "the URL this fedhost is reached at, scheme and host only (e.g. https://fedhost.example): the source URL of migration strings and the links mailed to users; empty takes each request's address", func(c *Config) *string { return &c.PublicURL }},
	{"suggested_domain", "the domain the UI suggests for a new deployment, {namespace} standing for its namespace (e.g. {namespace}.localhost); empty suggests none", func(c *Config) *string { return &c.SuggestedDomain }},
}

func (s setting) flag() string { return strings.ReplaceAll(s.name, "_", "-") }
func (s setting) env() string  { return "FEDHOST_" + strings.ToUpper(s.name) }

// RegisterFlags defines --config and a flag for every setting on fs. Load reads only
// the flags that were set, so a flag's default never overrides the file or the
// environment.
func RegisterFlags(fs *pflag.FlagSet) {
	fs.String(configFlag, "", "configuration file (env "+configEnv+"; default ./"+DefaultFile+" if it exists)")
	def := Default()
	for _, s := range settings {
		fs.String(s.flag(), *s.field(def), s.usage+" (env "+s.env()+")")
	}
}
