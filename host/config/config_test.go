package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
)

// writeFile writes src to fedhost.hcl in a new temporary directory and returns its path.
func writeFile(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fedhost.hcl")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	return path
}

// env returns a lookup function over the given KEY=value pairs.
func env(pairs ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// flags returns a flag set from RegisterFlags, parsed from args.
func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("fedhost", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	return fs
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `
listen    = "127.0.0.1:9000"
data_dir  = "/srv/file"
log_level = "debug"
`)

	tests := []struct {
		name    string
		env     []string
		args    []string
		want    func(*config.Config)
		wantErr string
	}{
		{
			name: "file over default",
			want: func(c *config.Config) {
				c.Listen, c.DataDir, c.LogLevel = "127.0.0.1:9000", "/srv/file", "debug"
			},
		},
		{
			name: "env over file",
			env:  []string{"FEDHOST_LISTEN=127.0.0.1:9001", "FEDHOST_PLUGIN_DIR=/srv/plugins", "FEDHOST_LOG_FORMAT=json"},
			want: func(c *config.Config) {
				c.Listen, c.DataDir, c.LogLevel = "127.0.0.1:9001", "/srv/file", "debug"
				c.PluginDir, c.LogFormat = "/srv/plugins", "json"
			},
		},
		{
			name: "flag over env",
			env:  []string{"FEDHOST_LISTEN=127.0.0.1:9001", "FEDHOST_DATA_DIR=/srv/env"},
			args: []string{"--listen=127.0.0.1:9002", "--log-level=warn"},
			want: func(c *config.Config) {
				c.Listen, c.DataDir, c.LogLevel = "127.0.0.1:9002", "/srv/env", "warn"
			},
		},
		{
			name: "unset flag keeps env and file",
			env:  []string{"FEDHOST_DATABASE=postgres://fedhost@db/fedhost"},
			args: []string{"--plugin-dir=/opt/plugins"},
			want: func(c *config.Config) {
				c.Listen, c.DataDir, c.LogLevel = "127.0.0.1:9000", "/srv/file", "debug"
				c.Database, c.PluginDir = "postgres://fedhost@db/fedhost", "/opt/plugins"
			},
		},
		{
			name: "empty env is unset",
			env:  []string{"FEDHOST_LISTEN="},
			want: func(c *config.Config) {
				c.Listen, c.DataDir, c.LogLevel = "127.0.0.1:9000", "/srv/file", "debug"
			},
		},
		{
			name:    "invalid flag names the flag",
			env:     []string{"FEDHOST_LOG_LEVEL=info"},
			args:    []string{"--log-level=verbose"},
			wantErr: `log_level (flag --log-level): is not a log level; use one of trace, debug, info, warn, error`,
		},
		{
			name:    "invalid env names the variable",
			env:     []string{"FEDHOST_LOG_FORMAT=yaml"},
			wantErr: `log_format (env FEDHOST_LOG_FORMAT): is not a log format; use one of text, json`,
		},
		{
			name:    "empty flag names the flag",
			args:    []string{"--listen="},
			wantErr: "listen (flag --listen): is empty; set a host:port such as 127.0.0.1:8080",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Load(file, env(tt.env...), flags(t, tt.args...))
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			want := config.Default()
			tt.want(want)
			want.File = file
			requireSettings(t, want, got)
		})
	}
}

func requireSettings(t *testing.T, want, got *config.Config) {
	t.Helper()
	require.Equal(t, want.Listen, got.Listen, "listen")
	require.Equal(t, want.DataDir, got.DataDir, "data_dir")
	require.Equal(t, want.Database, got.Database, "database")
	require.Equal(t, want.PluginDir, got.PluginDir, "plugin_dir")
	require.Equal(t, want.LogLevel, got.LogLevel, "log_level")
	require.Equal(t, want.LogFormat, got.LogFormat, "log_format")
	require.Equal(t, want.File, got.File, "file")
	require.Equal(t, want.ReadTimeout, got.ReadTimeout, "read_timeout")
	require.Equal(t, want.WriteTimeout, got.WriteTimeout, "write_timeout")
	require.Equal(t, want.IdleTimeout, got.IdleTimeout, "idle_timeout")
	require.Equal(t, want.TrustedProxies, got.TrustedProxies, "trusted_proxies")
	require.Equal(t, want.MaxDeploymentsPerOperator, got.MaxDeploymentsPerOperator, "max_deployments_per_operator")
	require.Equal(t, want.FrontDoorAddresses, got.FrontDoorAddresses, "front_door_addresses")
	require.Equal(t, want.FrontDoorHTTPSPort, got.FrontDoorHTTPSPort, "front_door_https_port")
	require.Equal(t, want.FrontDoorHTTPPort, got.FrontDoorHTTPPort, "front_door_http_port")
	require.Equal(t, want.SuggestedDomain, got.SuggestedDomain, "suggested_domain")
	require.Equal(t, want.Metrics, got.Metrics, "metrics")
	require.Equal(t, want.MetricsTokenFile, got.MetricsTokenFile, "metrics_token_file")
}

// GET /metrics is for loopback peers by default; "token" needs a readable file with a
// long enough token, and no message shows the token.
func TestMetricsSettings(t *testing.T) {
	t.Parallel()
	require.Equal(t, config.MetricsLoopback, config.Default().Metrics)

	token := filepath.Join(t.TempDir(), "metrics-token")
	require.NoError(t, os.WriteFile(token, []byte("0123456789abcdef0123\n"), 0o600))
	path := writeFile(t, "metrics = \"token\"\nmetrics_token_file = \""+token+"\"\n")
	cfg, err := config.Load(path, nil, nil)
	require.NoError(t, err)
	require.Equal(t, config.MetricsToken, cfg.Metrics)
	bearer, err := cfg.MetricsBearer()
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef0123", bearer, "surrounding white space is not the token's")

	cfg, err = config.Load("", env("FEDHOST_METRICS=off"), nil)
	require.NoError(t, err)
	require.Equal(t, config.MetricsOff, cfg.Metrics)

	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("s3cret"), 0o600))
	for _, bad := range []struct {
		env  []string
		want string
	}{
		{[]string{"FEDHOST_METRICS=public"}, "metrics (env FEDHOST_METRICS): is not a metrics access; use off, loopback"},
		{[]string{"FEDHOST_METRICS=token"}, "metrics_token_file (default): is empty; with metrics = \"token\", name the file"},
		{[]string{"FEDHOST_METRICS=token", "FEDHOST_METRICS_TOKEN_FILE=" + short}, "metrics_token_file (env FEDHOST_METRICS_TOKEN_FILE): " + short + " holds fewer than 16 characters"},
		{[]string{"FEDHOST_METRICS=token", "FEDHOST_METRICS_TOKEN_FILE=/nonexistent/token"}, "metrics_token_file (env FEDHOST_METRICS_TOKEN_FILE): open /nonexistent/token"},
	} {
		_, err := config.Load("", env(bad.env...), nil)
		require.ErrorContains(t, err, bad.want)
		require.NotContains(t, err.Error(), "s3cret", "the token is not shown")
		require.NotContains(t, err.Error(), "public", "the value is not echoed")
	}
}

func TestLoadConfigPath(t *testing.T) {
	t.Parallel()
	fromArg := writeFile(t, `listen = "127.0.0.1:1001"`)
	fromEnv := writeFile(t, `listen = "127.0.0.1:1002"`)
	fromFlag := writeFile(t, `listen = "127.0.0.1:1003"`)
	missing := filepath.Join(t.TempDir(), "nope.hcl")

	tests := []struct {
		name       string
		path       string
		env        []string
		args       []string
		wantListen string
		wantErr    string
	}{
		{name: "argument", path: fromArg, wantListen: "127.0.0.1:1001"},
		{name: "env over argument", path: fromArg, env: []string{"FEDHOST_CONFIG=" + fromEnv}, wantListen: "127.0.0.1:1002"},
		{name: "flag over env", path: fromArg, env: []string{"FEDHOST_CONFIG=" + fromEnv}, args: []string{"--config=" + fromFlag}, wantListen: "127.0.0.1:1003"},
		{
			name:    "missing argument",
			path:    missing,
			wantErr: "config file " + missing + " (named by the caller) does not exist; create it, or name no file to run the embedded default",
		},
		{
			name:    "missing env",
			env:     []string{"FEDHOST_CONFIG=" + missing},
			wantErr: "config file " + missing + " (env FEDHOST_CONFIG) does not exist; create it, or unset FEDHOST_CONFIG to run the embedded default",
		},
		{
			name:    "missing flag",
			path:    fromArg,
			args:    []string{"--config", missing},
			wantErr: "config file " + missing + " (flag --config) does not exist; create it, or drop --config to run the embedded default",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Load(tt.path, env(tt.env...), flags(t, tt.args...))
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantListen, got.Listen)
		})
	}
}

// TestLoadWithoutFile changes the working directory, so it cannot run in parallel.
func TestLoadWithoutFile(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		t.Chdir(t.TempDir())
		got, err := config.Load("", nil, nil)
		require.NoError(t, err)
		want := config.Default()
		for i, r := range want.Resources {
			if r.Type == "route" {
				want.Resources[i].Settings = json.RawMessage(`{"http_port":8000,"https_port":8443,"listen":"127.0.0.1","managed":true}`)
			}
		}
		require.Equal(t, want, got, "the embedded default, the route provider given the front door's ports")
		require.Equal(t, "127.0.0.1:8080", got.Listen)
		require.Equal(t, "./data", got.DataDir)
		require.Equal(t, "sqlite", got.Database)
		require.Equal(t, "bin/plugins", got.PluginDir)
		require.Equal(t, "info", got.LogLevel)
		require.Equal(t, "text", got.LogFormat)
		for typ, provider := range map[string]string{"postgresql": "postgresql", "s3": "versitygw", "secret": "embedded", "instance": "local"} {
			r, ok := got.Resource(typ)
			require.True(t, ok, typ)
			require.Equal(t, provider, r.Provider, typ)
		}
	})
	t.Run("fedhost.hcl in the working directory", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "fedhost.hcl"), []byte(`data_dir = "/srv/cwd"`), 0o600))
		t.Chdir(dir)
		got, err := config.Load("", nil, nil)
		require.NoError(t, err)
		require.Equal(t, "/srv/cwd", got.DataDir)
		require.Equal(t, "fedhost.hcl", got.File)
	})
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		// want are the lines of the error, without the file name before each.
		want []string
	}{
		{
			name: "unknown key",
			src:  "data_dir = \"./data\"\n\n  lisen = \"127.0.0.1:8080\"\n",
			want: []string{`:3,3-8: Unsupported argument; An argument named "lisen" is not expected here. Did you mean "listen"?`},
		},
		{
			name: "every diagnostic",
			src:  "lisen = \"x\"\ndata_dri = \"y\"\n",
			want: []string{
				`:1,1-6: Unsupported argument; An argument named "lisen" is not expected here. Did you mean "listen"?`,
				`:2,1-9: Unsupported argument; An argument named "data_dri" is not expected here. Did you mean "data_dir"?`,
			},
		},
		{
			name: "wrong type",
			src:  "listen = \"127.0.0.1:8080\"\ndata_dir = [\"a\", \"b\"]\n",
			want: []string{`:2,12-13: Unsuitable value type; Unsuitable value for data_dir: string required, but have tuple`},
		},
		{
			name: "null",
			src:  "log_level = null\n",
			want: []string{`:1,13-17: Unsuitable value type; Unsuitable value for log_level: a string is required, not null`},
		},
		{
			name: "syntax error",
			src:  "listen = \"127.0.0.1:8080\n",
			want: []string{
				`:1,25-2,1: Invalid multi-line string; Quoted strings may not be split over multiple lines. ` +
					`To produce a multi-line string, either use the \n escape to represent a newline character or use the "heredoc" multi-line template syntax.`,
				`:1,25-2,1: Unterminated template string; No closing marker was found for the string.`,
			},
		},
		{
			name: "unknown resource type",
			src:  "resource \"mysql\" {\n  provider = \"mysql\"\n}\n",
			want: []string{`:1,10-17: Unknown resource type; "mysql" is not a resource type; use one of secret, postgresql, s3, redis, smtp, dns, tls, ldap, oidc, instance, route.`},
		},
		{
			name: "duplicate resource label",
			src:  "resource \"s3\" {\n  provider = \"versitygw\"\n}\n\nresource \"s3\" {\n  provider = \"garage\"\n}\n",
			want: []string{`:5,1-14: Duplicate resource block; A resource "s3" block is already declared at {file}:1,1-14; keep only one.`},
		},
		{
			name: "duplicate registrar label",
			src:  "registrar \"inwx\" {}\nregistrar \"inwx\" {}\n",
			want: []string{`:2,1-17: Duplicate registrar block; A registrar "inwx" block is already declared at {file}:1,1-17; keep only one.`},
		},
		{
			name: "app settings not an object",
			src:  "app \"hello\" {\n  settings = \"loud\"\n}\n",
			want: []string{`:2,14-20: Invalid settings; settings must be an object, such as { key = "value" }.`},
		},
		{
			name: "empty provider",
			src:  "resource \"secret\" {\n  provider = \"\"\n}\n",
			want: []string{`:2,14-16: Empty provider; provider must name the provider plugin that answers this resource type, such as "embedded".`},
		},
		{
			name: "missing provider",
			src:  "resource \"secret\" {\n}\n",
			want: []string{`:1,19-19: Missing required argument; The argument "provider" is required, but no definition was found.`},
		},
		{
			name: "unknown key in resource",
			src:  "resource \"secret\" {\n  provider = \"embedded\"\n  setting = {}\n}\n",
			want: []string{`:3,3-10: Unsupported argument; An argument named "setting" is not expected here. Did you mean "settings"?`},
		},
		{
			name: "settings not an object",
			src:  "resource \"secret\" {\n  provider = \"embedded\"\n  settings = \"managed\"\n}\n",
			want: []string{`:3,14-23: Invalid settings; settings must be an object, such as { key = "value" }.`},
		},
		{
			name: "limit not a number",
			src:  "resource \"instance\" {\n  provider = \"local\"\n  limits = { per_deployment = \"eight\" }\n}\n",
			want: []string{`:3,12-40: Invalid limits; limits "per_deployment" must be a number, such as 8.`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tt.src)
			_, err := config.Load(path, nil, nil)
			require.Error(t, err)
			var want []string
			for _, line := range tt.want {
				want = append(want, path+strings.ReplaceAll(line, "{file}", path))
			}
			require.Equal(t, strings.Join(want, "\n"), err.Error())
		})
	}
}

func TestLoadSettingsJSON(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
resource "s3" {
  provider = "garage"
  settings = {
    endpoint = "http://127.0.0.1:3903"
    managed  = false
    regions  = ["garage", "eu-west"]
    quota    = { max_size = 1.5e9, max_objects = null }
  }
  limits = { buckets = 3, gib = 0.5 }
}

resource "secret" {
  provider = "embedded"
}

registrar "porkbun" {
  settings = { api_key_secret = "registrar/porkbun/key" }
}

app "hello" {
  settings = { footer = "Hosted by Example" }
}

app "miniflux" {}
`)
	got, err := config.Load(path, nil, nil)
	require.NoError(t, err)

	require.Len(t, got.Resources, 2, "file resources replace the default ones")
	s3, ok := got.Resource("s3")
	require.True(t, ok)
	require.Equal(t, "garage", s3.Provider)
	require.JSONEq(t, `{
		"endpoint": "http://127.0.0.1:3903",
		"managed": false,
		"regions": ["garage", "eu-west"],
		"quota": {"max_size": 1500000000, "max_objects": null}
	}`, string(s3.Settings))
	require.JSONEq(t, `{"buckets": 3, "gib": 0.5}`, string(s3.Limits))

	secret, ok := got.Resource("secret")
	require.True(t, ok)
	require.JSONEq(t, `{}`, string(secret.Settings))
	require.JSONEq(t, `{}`, string(secret.Limits))

	_, ok = got.Resource("postgresql")
	require.False(t, ok)

	require.Equal(t, []config.Registrar{{Name: "porkbun", Settings: json.RawMessage(`{"api_key_secret":"registrar/porkbun/key"}`)}}, got.Registrars)
	require.Len(t, got.Apps, 2)
	require.Equal(t, "hello", got.Apps[0].Name)
	require.JSONEq(t, `{"footer": "Hosted by Example"}`, string(got.Apps[0].Settings))
	require.Equal(t, "miniflux", got.Apps[1].Name)
	require.JSONEq(t, `{}`, string(got.Apps[1].Settings))
}

func TestDatabaseNeverInErrors(t *testing.T) {
	t.Parallel()
	const password = "s3cr3t-Pa55"
	bad := "mysql://fedhost:" + password + "@db/fedhost"

	tests := []struct {
		name      string
		src       string
		env       []string
		args      []string
		wantError string
	}{
		{
			name:      "file",
			src:       "database = \"" + bad + "\"\n",
			wantError: `database ({file}:1,1-52): is neither "sqlite" nor a postgres:// or postgresql:// URL; set one of them (the value is not shown as it may hold a password)`,
		},
		{
			name:      "env",
			env:       []string{"FEDHOST_DATABASE=" + bad},
			wantError: `database (env FEDHOST_DATABASE): is neither "sqlite" nor a postgres:// or postgresql:// URL; set one of them (the value is not shown as it may hold a password)`,
		},
		{
			name:      "flag",
			args:      []string{"--database", bad},
			wantError: `database (flag --database): is neither "sqlite" nor a postgres:// or postgresql:// URL; set one of them (the value is not shown as it may hold a password)`,
		},
		{
			name: "unparsable postgres URL",
			env:  []string{"FEDHOST_DATABASE=postgres://fedhost:" + password + "@db:port/%zz"},
			wantError: `database (env FEDHOST_DATABASE): is neither "sqlite" nor a postgres:// or postgresql:// URL; ` +
				`set one of them (the value is not shown as it may hold a password)`,
		},
		{
			name:      "file error on the same line",
			src:       "database = \"postgres://fedhost:" + password + "@db/fedhost\" lisen = 1\n",
			wantError: `{file}:1,56-61: Missing newline after argument; An argument definition must end with a newline.`,
		},
		{
			name:      "wrong type",
			src:       "database = { url = \"postgres://fedhost:" + password + "@db/fedhost\" }\n",
			wantError: `{file}:1,12-13: Unsuitable value type; Unsuitable value for database: string required, but have object`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tt.src)
			_, err := config.Load(path, env(tt.env...), flags(t, tt.args...))
			require.Error(t, err)
			require.NotContains(t, err.Error(), password)
			require.Equal(t, strings.ReplaceAll(tt.wantError, "{file}", path), err.Error())
		})
	}
}

func TestLoadPostgresDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, dsn string }{
		{"postgres with password", "postgres://fedhost:pw@db/fedhost"},
		{"postgresql over a socket", "postgresql:///fedhost?host=/run/postgresql"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Load(writeFile(t, ""), env("FEDHOST_DATABASE="+tt.dsn), nil)
			require.NoError(t, err)
			require.Equal(t, tt.dsn, got.Database)
		})
	}
}

func TestRegisterFlagsNamesEnv(t *testing.T) {
	t.Parallel()
	fs := flags(t)
	for flag, envVar := range map[string]string{
		"config": "FEDHOST_CONFIG", "listen": "FEDHOST_LISTEN", "data-dir": "FEDHOST_DATA_DIR",
		"database": "FEDHOST_DATABASE", "plugin-dir": "FEDHOST_PLUGIN_DIR",
		"log-level": "FEDHOST_LOG_LEVEL", "log-format": "FEDHOST_LOG_FORMAT",
	} {
		f := fs.Lookup(flag)
		require.NotNil(t, f, flag)
		require.Contains(t, f.Usage, envVar, flag)
	}
}

func TestExampleFile(t *testing.T) {
	t.Parallel()
	const example = "../../examples/fedhost.hcl"
	got, err := config.Load(example, nil, nil)
	require.NoError(t, err)

	// The example documents the embedded default: the same settings and, for the
	// types the default has, the same resource blocks.
	want := config.Default()
	want.File = example
	requireSettings(t, want, got)
	for _, r := range want.Resources {
		g, ok := got.Resource(r.Type)
		require.True(t, ok, r.Type)
		require.Equal(t, r.Provider, g.Provider, r.Type)
		if r.Type == "route" {
			r.Settings = json.RawMessage(`{"http_port":8000,"https_port":8443,"listen":"127.0.0.1","managed":true}`)
		}
		require.JSONEq(t, string(r.Settings), string(g.Settings), r.Type)
		require.JSONEq(t, string(r.Limits), string(g.Limits), r.Type)
	}
	redis, ok := got.Resource("redis")
	require.True(t, ok)
	require.Equal(t, "redis", redis.Provider)
	require.Len(t, got.Registrars, 1)
	require.Equal(t, "porkbun", got.Registrars[0].Name)
	require.Len(t, got.Apps, 1)
	require.Equal(t, "hello", got.Apps[0].Name)
}

func TestBackupsBlocks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fedhost.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`
backup_keep_within = "2w"
backups "miniflux" {
  schedule    = "30 3 * * *"
  keep_within = "90d"
}
backups "peertube" {
  keep_within = "7d"
}
`), 0o600))
	c, err := config.Load(path, nil, nil)
	require.NoError(t, err)
	s, k := c.BackupPolicy("miniflux")
	require.Equal(t, "30 3 * * *", s)
	require.Equal(t, "90d", k)
	s, k = c.BackupPolicy("peertube")
	require.Equal(t, "@daily", s, "an app without its own schedule takes backup_schedule")
	require.Equal(t, "7d", k)
	s, k = c.BackupPolicy("pixelfed")
	require.Equal(t, "@daily", s)
	require.Equal(t, "2w", k)
	d, err := config.KeepWithin("1w12h")
	require.NoError(t, err)
	require.Equal(t, 7*24*time.Hour+12*time.Hour, d)

	require.NoError(t, os.WriteFile(path, []byte(`
backups "miniflux" {
  schedule    = "every day"
  keep_within = "1y"
}
`), 0o600))
	_, err = config.Load(path, nil, nil)
	require.ErrorContains(t, err, "backups.miniflux.schedule")
	require.ErrorContains(t, err, "fedhost.hcl:3")
	require.ErrorContains(t, err, "backups.miniflux.keep_within")
	require.ErrorContains(t, err, `keep_within (`+path+`:4,3-21): is not a retention`)
	require.ErrorContains(t, err, "expected exactly 5 fields, found 2;")
	require.NotContains(t, err.Error(), "1y", "no error echoes the value it refuses")
	require.NotContains(t, err.Error(), "every day", "no error echoes the value it refuses")
}

// TestBackupScheduleTimeZones: robfig/cron panics on a zone prefix with nothing after it;
// every such schedule, wherever it is set, is a config error naming the setting and its
// source, and a zone with a schedule after it loads.
func TestBackupScheduleTimeZones(t *testing.T) {
	t.Parallel()
	bad := []string{"CRON_TZ=Europe/Amsterdam", "CRON_TZ=", "TZ=UTC", "TZ=", "CRON_TZ= 0 3 * * *", "CRON_TZ=Nowhere/Atlantis 0 3 * * *"}
	for _, spec := range bad {
		t.Run("env "+spec, func(t *testing.T) {
			_, err := config.Load("", env("FEDHOST_BACKUP_SCHEDULE="+spec), nil)
			require.ErrorContains(t, err, "backup_schedule (env FEDHOST_BACKUP_SCHEDULE)")
			require.ErrorContains(t, err, "is not a schedule")
		})
		t.Run("flag "+spec, func(t *testing.T) {
			_, err := config.Load("", nil, flags(t, "--backup-schedule="+spec))
			require.ErrorContains(t, err, "backup_schedule (flag --backup-schedule)")
		})
		t.Run("file "+spec, func(t *testing.T) {
			path := writeFile(t, "backup_schedule = \""+spec+"\"\n")
			_, err := config.Load(path, nil, nil)
			require.ErrorContains(t, err, "backup_schedule ("+path+":1")
		})
		t.Run("block "+spec, func(t *testing.T) {
			path := writeFile(t, "backups \"miniflux\" {\n  keep_within = \"7d\"\n  schedule = \""+spec+"\"\n}\n")
			_, err := config.Load(path, nil, nil)
			require.ErrorContains(t, err, "backups.miniflux.schedule ("+path+":3")
			require.ErrorContains(t, err, "is not a schedule")
		})
	}

	c, err := config.Load("", env("FEDHOST_BACKUP_SCHEDULE=CRON_TZ=Europe/Amsterdam 0 3 * * *"), nil)
	require.NoError(t, err)
	s, _ := c.BackupPolicy("miniflux")
	require.Equal(t, "CRON_TZ=Europe/Amsterdam 0 3 * * *", s)
	path := writeFile(t, "backups \"miniflux\" {\n  schedule = \"TZ=America/New_York 30 6 * * *\"\n}\n")
	c, err = config.Load(path, nil, nil)
	require.NoError(t, err)
	s, _ = c.BackupPolicy("miniflux")
	require.Equal(t, "TZ=America/New_York 30 6 * * *", s)
}

func TestServerSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("", env("FEDHOST_READ_TIMEOUT=5s", "FEDHOST_TRUSTED_PROXIES=10.0.0.0/8, 192.0.2.7", "FEDHOST_MAX_DEPLOYMENTS_PER_OPERATOR=3"), flags(t, "--idle-timeout=2m"))
	require.NoError(t, err)
	read, write, idle := cfg.Timeouts()
	require.Equal(t, []time.Duration{5 * time.Second, time.Minute, 2 * time.Minute}, []time.Duration{read, write, idle})
	require.Equal(t, []string{"10.0.0.0/8", "192.0.2.7"}, cfg.Proxies())
	require.Equal(t, 3, cfg.DeploymentLimit())
	require.Empty(t, config.Default().Proxies(), "no proxy is trusted by default")

	for _, bad := range []struct{ env, want string }{
		{"FEDHOST_READ_TIMEOUT=0s", "read_timeout (env FEDHOST_READ_TIMEOUT): is not a duration from 1s to 1h"},
		{"FEDHOST_WRITE_TIMEOUT=soon", "write_timeout (env FEDHOST_WRITE_TIMEOUT)"},
		{"FEDHOST_TRUSTED_PROXIES=10.0.0.0/8,proxy.example", "trusted_proxies (env FEDHOST_TRUSTED_PROXIES): entry 2 is neither an IP address nor a CIDR"},
		{"FEDHOST_MAX_DEPLOYMENTS_PER_OPERATOR=-1", "max_deployments_per_operator (env FEDHOST_MAX_DEPLOYMENTS_PER_OPERATOR)"},
	} {
		_, err := config.Load("", env(bad.env), nil)
		require.ErrorContains(t, err, bad.want)
	}
}

// The front door's addresses and ports are checked, and given to the route provider as
// its ports where its block leaves them out; .localhost suggestions are the embedded
// default's alone.
func TestFrontDoorSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("", env("FEDHOST_FRONT_DOOR_ADDRESSES=203.0.113.10, 2001:db8::10"), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"203.0.113.10", "2001:db8::10"}, cfg.FrontDoorIPs())
	https, http := cfg.FrontDoorPorts()
	require.Equal(t, []int{8443, 8000}, []int{https, http}, "the embedded default's ports")
	require.Equal(t, "{namespace}.localhost", cfg.SuggestedDomain)

	path := writeFile(t, `
front_door_https_port = "443"
resource "route" {
  provider = "caddy"
  settings = { managed = true }
}
resource "tls" {
  provider = "acme"
  settings = { directory_url = "https://acme.example/directory" }
}
`)
	cfg, err = config.Load(path, nil, nil)
	require.NoError(t, err)
	route, ok := cfg.Resource("route")
	require.True(t, ok)
	require.JSONEq(t, `{"managed":true,"https_port":443,"http_port":8000}`, string(route.Settings))
	tls, _ := cfg.Resource("tls")
	require.JSONEq(t, `{"directory_url":"https://acme.example/directory"}`, string(tls.Settings), "only the route provider gets the ports")
	require.Empty(t, cfg.SuggestedDomain, "a provider's own resources suggest no .localhost domain")

	path = writeFile(t, `
resource "route" {
  provider = "caddy"
  settings = { https_port = 9443 }
}
`)
	cfg, err = config.Load(path, nil, nil)
	require.NoError(t, err)
	route, _ = cfg.Resource("route")
	require.JSONEq(t, `{"https_port":9443,"http_port":8000}`, string(route.Settings), "a port the block sets is kept")

	for _, bad := range []struct{ env, want string }{
		{"FEDHOST_FRONT_DOOR_ADDRESSES=203.0.113.10,front.example", "front_door_addresses (env FEDHOST_FRONT_DOOR_ADDRESSES): entry 2 is not an IP address"},
		{"FEDHOST_FRONT_DOOR_HTTPS_PORT=70000", "front_door_https_port (env FEDHOST_FRONT_DOOR_HTTPS_PORT): is not a port"},
		{"FEDHOST_FRONT_DOOR_HTTP_PORT=http", "front_door_http_port (env FEDHOST_FRONT_DOOR_HTTP_PORT): is not a port"},
		{"FEDHOST_SUGGESTED_DOMAIN=-bad-.{namespace}", "suggested_domain (env FEDHOST_SUGGESTED_DOMAIN): is not a domain name"},
	} {
		_, err := config.Load("", env(bad.env), nil)
		require.ErrorContains(t, err, bad.want)
		require.NotContains(t, err.Error(), "front.example", "the value is not echoed")
	}
}

// The domain settings: the delegation resolver (port 53 unless given), the pending-follow
// time and the snapshot interval, each refused naming the setting and without its value.
func TestDomainSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("", nil, nil)
	require.NoError(t, err)
	require.Empty(t, cfg.DelegationResolver(), "the system's resolver by default")
	require.Equal(t, 2*time.Minute, cfg.PendingFollow())
	require.Equal(t, 24*time.Hour, cfg.SnapshotInterval())

	path := writeFile(t, `
domain_delegation_resolver = "192.0.2.53"
domain_pending_follow      = "30s"
domain_snapshot_interval   = "1h"
`)
	cfg, err = config.Load(path, env("FEDHOST_DOMAIN_SNAPSHOT_INTERVAL=10s"), nil)
	require.NoError(t, err)
	require.Equal(t, "192.0.2.53:53", cfg.DelegationResolver())
	require.Equal(t, 30*time.Second, cfg.PendingFollow())
	require.Equal(t, 10*time.Second, cfg.SnapshotInterval(), "the environment beats the file")
	for resolver, want := range map[string]string{"resolver.example:5353": "resolver.example:5353", "2001:db8::53": "[2001:db8::53]:53", "[2001:db8::53]:54": "[2001:db8::53]:54"} {
		cfg, err := config.Load("", nil, flags(t, "--domain-delegation-resolver="+resolver))
		require.NoError(t, err, resolver)
		require.Equal(t, want, cfg.DelegationResolver())
	}

	for _, bad := range []struct{ env, want string }{
		{"FEDHOST_DOMAIN_DELEGATION_RESOLVER=bad_host!:53", "domain_delegation_resolver (env FEDHOST_DOMAIN_DELEGATION_RESOLVER): is not a resolver address"},
		{"FEDHOST_DOMAIN_DELEGATION_RESOLVER=192.0.2.53:99999", "domain_delegation_resolver (env FEDHOST_DOMAIN_DELEGATION_RESOLVER): is not a resolver address"},
		{"FEDHOST_DOMAIN_PENDING_FOLLOW=bad_host!", "domain_pending_follow (env FEDHOST_DOMAIN_PENDING_FOLLOW): is not a duration from 1s to 1h"},
		{"FEDHOST_DOMAIN_PENDING_FOLLOW=2h", "domain_pending_follow (env FEDHOST_DOMAIN_PENDING_FOLLOW): is not a duration from 1s to 1h"},
		{"FEDHOST_DOMAIN_SNAPSHOT_INTERVAL=bad_host!", "domain_snapshot_interval (env FEDHOST_DOMAIN_SNAPSHOT_INTERVAL): is not a duration from 1s to 168h"},
		{"FEDHOST_DOMAIN_SNAPSHOT_INTERVAL=0s", "domain_snapshot_interval (env FEDHOST_DOMAIN_SNAPSHOT_INTERVAL)"},
	} {
		_, err := config.Load("", env(bad.env), nil)
		require.ErrorContains(t, err, bad.want)
		require.NotContains(t, err.Error(), "bad_host!", "the value is not echoed")
		require.NotContains(t, err.Error(), "99999", "the value is not echoed")
	}
}

// public_url: unset by default; taken from the file, the environment or the flag; an
// absolute http(s) URL without path, query or fragment, refused naming the setting and
// without its value.
func TestPublicURL(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("", nil, nil)
	require.NoError(t, err)
	require.Empty(t, cfg.PublicBase(), "unset: each request's address")

	cfg, err = config.Load(writeFile(t, `public_url = "https://fedhost.example/"`), nil, nil)
	require.NoError(t, err)
	require.Equal(t, "https://fedhost.example", cfg.PublicBase(), "the trailing slash goes")
	cfg, err = config.Load("", env("FEDHOST_PUBLIC_URL=http://127.0.0.1:8080"), nil)
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:8080", cfg.PublicBase())
	cfg, err = config.Load("", env("FEDHOST_PUBLIC_URL=http://env.example"), flags(t, "--public-url=https://flag.example:8443"))
	require.NoError(t, err)
	require.Equal(t, "https://flag.example:8443", cfg.PublicBase(), "the flag beats the environment")

	for _, bad := range []string{"ftp://secret-host.example", "secret-host.example", "https://secret-host.example/path", "https://secret-host.example?q=1",
		"https://secret-host.example/#frag", "https://user@secret-host.example", "https://", "https://secret-host.example/" + strings.Repeat("a", 600)} {
		_, err := config.Load("", env("FEDHOST_PUBLIC_URL="+bad), nil)
		require.ErrorContains(t, err, "public_url (env FEDHOST_PUBLIC_URL): is not an absolute http or https URL", bad)
		require.NotContains(t, err.Error(), "secret-host", "the value is not echoed")
	}
}
