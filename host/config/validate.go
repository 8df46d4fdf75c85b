package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fedhost/fedhost/scheduler"
)

var (
	logLevels  = []string{"trace", "debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
)

// validate checks the merged settings. Each error names the setting and its source
// and says what to do; none shows the database setting's value.
func (c *Config) validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		source := c.sources[name]
		if source == "" {
			source = "default"
		}
		errs = append(errs, fmt.Errorf("%s (%s): %s", name, source, fmt.Sprintf(format, args...)))
	}

	if c.Listen == "" {
		bad("listen", "is empty; set a host:port such as 127.0.0.1:8080")
	} else if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		bad("listen", "is not a host:port; set one such as 127.0.0.1:8080 or :8080")
	}
	if c.DataDir == "" {
		bad("data_dir", "is empty; set the directory fedhost keeps its data in, such as ./data")
	}
	if c.PluginDir == "" {
		bad("plugin_dir", "is empty; set the directory of the plugins, such as bin/plugins")
	}
	if !validDatabase(c.Database) {
		// The value is not shown: a PostgreSQL URL may hold a password.
		bad("database", `is neither "sqlite" nor a postgres:// or postgresql:// URL; set one of them (the value is not shown as it may hold a password)`)
	}
	if !slices.Contains(logLevels, c.LogLevel) {
		bad("log_level", "is not a log level; use one of %s", strings.Join(logLevels, ", "))
	}
	if !slices.Contains(logFormats, c.LogFormat) {
		bad("log_format", "is not a log format; use one of %s", strings.Join(logFormats, ", "))
	}
	if d, err := time.ParseDuration(c.UpdateCheckInterval); err != nil || d < time.Second {
		bad("update_check_interval", "is not a duration of at least 1s, such as 1m")
	}
	if days, err := strconv.Atoi(c.AuditRetentionDays); err != nil || days < 0 {
		bad("audit_retention_days", "is not a number of days; use 0 to keep all events, or e.g. 365")
	}
	if days, err := strconv.Atoi(c.PasswordLinkDays); err != nil || days < 1 || days > 90 {
		bad("password_link_days", "is not a number of days from 1 to 90, such as 7")
	}
	if days, err := strconv.Atoi(c.BuildLogRetentionDays); err != nil || days < 0 {
		bad("build_log_retention_days", "is not a number of days; use 0 to keep all build logs, or e.g. 30")
	}
	for _, t := range []struct{ name, value string }{{"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout}, {"idle_timeout", c.IdleTimeout}} {
		if d, err := time.ParseDuration(t.value); err != nil || d < time.Second || d > time.Hour {
			bad(t.name, "is not a duration from 1s to 1h; use e.g. 30s or 2m")
		}
	}
	for i, p := range c.Proxies() {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			bad("trusted_proxies", "entry %d is neither an IP address nor a CIDR; list proxies as e.g. 10.0.0.0/8, 192.0.2.7", i+1)
		}
	}
	if n, err := strconv.Atoi(c.MaxDeploymentsPerOperator); err != nil || n < 0 {
		bad("max_deployments_per_operator", "is not a number of deployments; use 0 for no limit, or e.g. 20")
	}
	for i, a := range c.FrontDoorIPs() {
		if net.ParseIP(a) == nil {
			bad("front_door_addresses", "entry %d is not an IP address; list the front door's public IPs, such as 203.0.113.10, 2001:db8::10", i+1)
		}
	}
	for _, p := range []struct{ name, value string }{{"front_door_https_port", c.FrontDoorHTTPSPort}, {"front_door_http_port", c.FrontDoorHTTPPort}} {
		if n, err := strconv.Atoi(p.value); err != nil || n < 1 || n > 65535 {
			bad(p.name, "is not a port from 1 to 65535; set the port the route provider listens on, such as 443")
		}
	}
	if d := c.SuggestedDomain; d != "" {
		probe := strings.ReplaceAll(d, "{namespace}", "ns")
		if len(d) > 200 || !suggestedDomain.MatchString(probe) {
			bad("suggested_domain", "is not a domain name with an optional {namespace}, such as {namespace}.localhost")
		}
	}
	if u := c.PublicURL; u != "" && !publicURL(u) {
		bad("public_url", "is not an absolute http or https URL of at most %d characters without a path, query or fragment; set the address this fedhost is reached at, such as https://fedhost.example", maxPublicURL)
	}
	switch c.Metrics {
	case MetricsOff, MetricsLoopback:
	case MetricsToken:
		// The token is read to prove it is there; no message shows it.
		if _, err := c.MetricsBearer(); err != nil {
			bad("metrics_token_file", "%v", err)
		}
	default:
		bad("metrics", "is not a metrics access; use off, loopback (requests from this machine) or token (a bearer token in metrics_token_file)")
	}
	if r := c.DomainDelegationResolver; r != "" && !validResolver(r) {
		bad("domain_delegation_resolver", "is not a resolver address; give an IP or host name with an optional port, such as 192.0.2.53 or resolver.example:53, or leave it empty for the system's")
	}
	if d, err := time.ParseDuration(c.DomainPendingFollow); err != nil || d < time.Second || d > time.Hour {
		bad("domain_pending_follow", "is not a duration from 1s to 1h; use e.g. 2m")
	}
	if d, err := time.ParseDuration(c.DomainSnapshotInterval); err != nil || d < time.Second || d > 7*24*time.Hour {
		bad("domain_snapshot_interval", "is not a duration from 1s to 168h; use e.g. 24h")
	}
	validateBackups("backup_", c.BackupSchedule, c.BackupKeepWithin, bad)
	apps := make([]string, 0, len(c.Backups))
	for app := range c.Backups {
		apps = append(apps, app)
	}
	slices.Sort(apps)
	for _, app := range apps {
		b := c.Backups[app]
		validateBackups("backups."+app+".", b.Schedule, b.KeepWithin, bad)
	}
	if o := c.OperatorOIDC; o != nil {
		validateOperatorOIDC(o, bad)
	}
	return errors.Join(errs...)
}

// validResolver: an IP or a host name, with an optional port from 1 to 65535.
func validResolver(r string) bool {
	if len(r) > 255 {
		return false
	}
	host := r
	if h, port, err := net.SplitHostPort(r); err == nil {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return false
		}
		host = h
	}
	return net.ParseIP(host) != nil || suggestedDomain.MatchString(strings.ToLower(host))
}

// suggestedDomain is a domain name of lower case labels (with {namespace} replaced).
var suggestedDomain = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// keepWithin is a retention: numbers of weeks, days and hours, such as 30d or 1w12h.
var keepWithin = regexp.MustCompile(`^([0-9]+[wdh])+$`)

// KeepWithin parses a retention such as 30d (w, d and h are weeks, days and hours).
func KeepWithin(s string) (time.Duration, error) {
	if !keepWithin.MatchString(s) {
		return 0, errors.New("is not a retention; use numbers with w, d or h, such as 30d or 1w12h")
	}
	var total time.Duration
	n := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			n = n*10 + int(r-'0')
			continue
		}
		unit := map[rune]time.Duration{'w': 7 * 24 * time.Hour, 'd': 24 * time.Hour, 'h': time.Hour}[r]
		total += time.Duration(n) * unit
		n = 0
	}
	if total < time.Hour {
		return 0, errors.New("keeps nothing; keep backups at least an hour, such as 30d")
	}
	return total, nil
}

// validateBackups checks a schedule and a retention; empty ones are left to the defaults.
// prefix names the setting ("backup_" or "backups.<app>.").
func validateBackups(prefix, schedule, keep string, bad func(name, format string, args ...any)) {
	scheduleName, keepName := prefix+"schedule", prefix+"keep_within"
	if schedule != "" {
		if _, err := scheduler.ParseCron(schedule); err != nil {
			bad(scheduleName, "is not a schedule: %v", err)
		}
	} else if prefix == "backup_" {
		bad(scheduleName, "is empty; set when apps are backed up, such as @daily")
	}
	if keep != "" {
		if _, err := KeepWithin(keep); err != nil {
			bad(keepName, "%v", err)
		}
	} else if prefix == "backup_" {
		bad(keepName, "is empty; set how long backups are kept, such as 30d")
	}
}

// OIDCCallbackPath is where fedhost answers the OpenID provider; redirect_url must end in it.
const OIDCCallbackPath = "/login/oidc/callback"

func validateOperatorOIDC(o *OperatorOIDC, bad func(name, format string, args ...any)) {
	if !httpsURL(o.Issuer) {
		bad("operator_oidc.issuer", "is not an https URL; give the address of the OpenID provider, such as https://id.example.org (http only on 127.0.0.1 or localhost)")
	}
	if o.ClientID == "" {
		bad("operator_oidc.client_id", "is empty; give the client ID the OpenID provider registered for fedhost")
	}
	if !httpsURL(o.RedirectURL) {
		bad("operator_oidc.redirect_url", "is not an https URL; give fedhost's own address followed by %s, as registered with the OpenID provider (http only on 127.0.0.1 or localhost)", OIDCCallbackPath)
	} else if u, _ := url.Parse(o.RedirectURL); u.Path != OIDCCallbackPath || u.RawQuery != "" {
		bad("operator_oidc.redirect_url", "does not end in %s, where fedhost answers the OpenID provider; give e.g. https://fedhost.example.org%s", OIDCCallbackPath, OIDCCallbackPath)
	}
	// The secret is read to prove it is there; no message shows it.
	if o.ClientSecretFile == "" {
		bad("operator_oidc.client_secret_file", "is empty; name the file that holds the client secret, readable by fedhost only")
	} else if _, err := o.ClientSecret(); err != nil {
		bad("operator_oidc.client_secret_file", "%v", err)
	}
	if o.UsernameClaim == "" {
		bad("operator_oidc.username_claim", "is empty; name the ID token claim that holds the fedhost user name, or leave it out for %s", DefaultUsernameClaim)
	}
	if o.ButtonLabel == "" {
		bad("operator_oidc.button_label", "is empty; give the text of the log-in button, or leave it out for %q", DefaultButtonLabel)
	}
}

// httpsURL reports whether s is an absolute https URL, or an http one on the loopback
// host, which only a test or a provider on the same machine can be.
func httpsURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		host := u.Hostname()
		return host == "localhost" || host == "127.0.0.1" || host == "::1"
	}
	return false
}

func validDatabase(db string) bool {
	if db == "sqlite" {
		return true
	}
	if !strings.HasPrefix(db, "postgres://") && !strings.HasPrefix(db, "postgresql://") {
		return false
	}
	_, err := url.Parse(db)
	return err == nil
}

// maxPublicURL bounds public_url, which goes into every migration string and mailed link.
const maxPublicURL = 512

// publicURL reports whether s is an absolute http(s) URL with a host and nothing after
// it but an optional "/".
func publicURL(s string) bool {
	if len(s) > maxPublicURL || strings.ContainsAny(s, "?# \t\n") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.User != nil || u.Opaque != "" {
		return false
	}
	return u.Path == "" || u.Path == "/"
}
