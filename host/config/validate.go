package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
		bad("listen", "%q is not a host:port; set one such as 127.0.0.1:8080 or :8080", c.Listen)
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
		bad("log_level", "%q is not a log level; use one of %s", c.LogLevel, strings.Join(logLevels, ", "))
	}
	if !slices.Contains(logFormats, c.LogFormat) {
		bad("log_format", "%q is not a log format; use one of %s", c.LogFormat, strings.Join(logFormats, ", "))
	}
	if days, err := strconv.Atoi(c.AuditRetentionDays); err != nil || days < 0 {
		bad("audit_retention_days", "%q is not a number of days; use 0 to keep all events, or e.g. 365", c.AuditRetentionDays)
	}
	return errors.Join(errs...)
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
