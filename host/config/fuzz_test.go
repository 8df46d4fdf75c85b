package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedhost/fedhost/host/config"
)

// FuzzLoad loads a fedhost.hcl and one FEDHOST_* variable, as `fedhost serve` does, and
// validates the result. Load must return a config or an error, never panic, and no
// error may show the database setting, which may hold a password.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("../../examples/fedhost.hcl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example), "", "")
	f.Add("", "FEDHOST_BACKUP_SCHEDULE", "30 3 * * *")
	f.Add("", "FEDHOST_BACKUP_SCHEDULE", "CRON_TZ=Europe/Amsterdam 30 3 * * *")
	f.Add("", "FEDHOST_BACKUP_KEEP_WITHIN", "1w12h")
	f.Add("", "FEDHOST_DATABASE", "postgres://fedhost:s3cr3t-Pa55@db:port/%zz")
	f.Add("", "FEDHOST_LISTEN", ":8080")
	f.Add("", "FEDHOST_UPDATE_CHECK_INTERVAL", "1m")
	f.Add("backups \"miniflux\" {\n  schedule    = \"@every 12h\"\n  keep_within = \"90d\"\n}\n", "", "")
	f.Add("resource \"instance\" {\n  provider = \"local\"\n  limits   = { per_deployment = 8 }\n}\n", "", "")
	f.Add("operator_oidc {\n  issuer = \"https://id.example.org\"\n  client_id = \"fedhost\"\n"+
		"  client_secret_file = \"/nonexistent/secret\"\n  redirect_url = \"https://fedhost.example.org/login/oidc/callback\"\n}\n", "", "")

	dir := f.TempDir()
	path := filepath.Join(dir, "fedhost.hcl")
	f.Fuzz(func(t *testing.T, src, name, value string) {
		if name == "FEDHOST_CONFIG" {
			t.Skip("the file is src; another name could be any file of this machine")
		}
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		lookup := func(k string) (string, bool) {
			if k == name {
				return value, true
			}
			return "", false
		}
		cfg, err := config.Load(path, lookup, nil)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Load returned config %v and error %v: want exactly one", cfg != nil, err)
		}
		if err == nil {
			return
		}
		if name != "FEDHOST_DATABASE" {
			return
		}
		// Whatever else is wrong, an error that shows the password now and not when the
		// database is another URL shows the setting.
		password := urlPassword(value)
		if len(password) < 4 || !strings.Contains(err.Error(), password) {
			return
		}
		_, without := config.Load(path, func(k string) (string, bool) {
			if k == name {
				return "mysql://fedhost@db/fedhost", true
			}
			return "", false
		}, nil)
		if without == nil || !strings.Contains(without.Error(), password) {
			t.Fatalf("the error shows the database password %q: %v", password, err)
		}
	})
}

// urlPassword is the password of a URL such as postgres://user:password@host/db, also
// when the rest of it does not parse.
func urlPassword(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, password, _ := strings.Cut(rest[:at], ":")
	return password
}
