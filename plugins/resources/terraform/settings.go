package main

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// served are the types a module may answer: every type of the contract but the secret
// resource (which reveals values), the instance (an instance driver's) and the route (the
// host's front door).
var served = []string{contract.PostgreSQL, contract.S3, contract.Redis, contract.LDAP, contract.SMTP, contract.DNS, contract.TLS, contract.OIDC}

const settingsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "modules": {
      "type": "object",
      "description": "The module that answers each resource type (postgresql, s3, redis, ldap, smtp, dns, tls, oidc): its directory, or an object with its directory and variables of the hosting provider's own",
      "additionalProperties": {
        "oneOf": [
          {"type": "string", "minLength": 1, "maxLength": 4096},
          {
            "type": "object",
            "properties": {
              "dir": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "The module's directory (absolute)"},
              "variables": {
                "type": "object",
                "maxProperties": 100,
                "description": "Values of the module's variables that the hosting provider sets (an admin connection, a region), given to every run, by Terraform names"
              }
            },
            "required": ["dir"],
            "additionalProperties": false
          }
        ]
      }
    },
    "state_address": {"type": "string", "minLength": 1, "maxLength": 2048, "description": "The host's Terraform state backend; the host fills it in"},
    "state_key": {"type": "string", "minLength": 32, "maxLength": 256, "writeOnly": true, "description": "The key the workspace tokens are minted with; the host fills it in"},
    "terraform": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "The terraform (or tofu) binary; terraform on PATH when unset"},
    "provider_mirror": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "The only place Terraform installs providers from (a filesystem mirror); providers in the data directory when unset. No registry is asked"},
    "stale_lock_after": {"type": "string", "pattern": "^[0-9]{1,6}(s|m|h)$", "default": "15m", "description": "A state lock older than this is taken for a crashed run's and released; a younger one fails the run"},
    "timeout": {"type": "string", "pattern": "^[0-9]{1,6}(s|m|h)$", "default": "30m", "description": "How long one provision or deprovision may run"}
  },
  "additionalProperties": false
}`

// reserved are the variables the provider gives every run itself.
var reserved = []string{"tenant", "instance", "request", "secrets", "new_secret", "retain"}

// settings of fedhost.hcl's resource block.
type settings struct {
	Modules        map[string]json.RawMessage `json:"modules"`
	StateAddress   string                     `json:"state_address"`
	StateKey       string                     `json:"state_key"`
	Terraform      string                     `json:"terraform"`
	ProviderMirror string                     `json:"provider_mirror"`
	StaleLockAfter string                     `json:"stale_lock_after"`
	Timeout        string                     `json:"timeout"`
}

// module is the module of one type.
type module struct {
	Dir       string                     `json:"dir"`
	Variables map[string]json.RawMessage `json:"variables"`
}

// config is the settings checked and resolved.
type config struct {
	modules        map[string]module
	stateAddress   *url.URL
	stateKey       string
	terraform      string
	providerMirror string
	staleLockAfter time.Duration
	timeout        time.Duration
}

var variableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)

func parseSettings(raw json.RawMessage, dataDir string) (*config, error) {
	var s settings
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, sdk.Invalid("settings", "the settings are not an object of the terraform provider's settings: see its README")
		}
	}
	c := &config{modules: map[string]module{}, stateKey: s.StateKey}
	for typ, rawModule := range s.Modules {
		field := "settings/modules/" + typ
		if !slices.Contains(served, typ) {
			return nil, sdk.Invalid(field, "a module cannot answer %s: the terraform provider answers %v", typ, served)
		}
		var m module
		if json.Unmarshal(rawModule, &m.Dir) != nil {
			if err := json.Unmarshal(rawModule, &m); err != nil {
				return nil, sdk.Invalid(field, "a module is its directory, or an object with dir and variables")
			}
		}
		if !filepath.IsAbs(m.Dir) {
			return nil, sdk.Invalid(field, "the module's directory must be an absolute path")
		}
		if info, err := os.Stat(m.Dir); err != nil || !info.IsDir() {
			return nil, sdk.Invalid(field, "the module's directory %s is not a directory this provider can read: check the path and its permissions", m.Dir)
		}
		for name := range m.Variables {
			if !variableName.MatchString(name) || slices.Contains(reserved, name) {
				return nil, sdk.Invalid(field+"/variables", "a variable of the hosting provider must be a Terraform name that is not one the provider sets itself (%v)", reserved)
			}
		}
		c.modules[typ] = m
	}
	if len(c.modules) > 0 {
		if s.StateAddress == "" || s.StateKey == "" {
			return nil, sdk.Invalid("settings/state_address", "no state backend: run the provider under the host, which fills in state_address and state_key")
		}
		u, err := url.Parse(s.StateAddress)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, sdk.Invalid("settings/state_address", "the state backend must be an http:// or https:// URL, as the host fills it in")
		}
		c.stateAddress = u
	}
	c.terraform = s.Terraform
	if c.terraform == "" {
		path, err := exec.LookPath("terraform")
		if err != nil && len(c.modules) > 0 {
			return nil, sdk.Invalid("settings/terraform", "no terraform on PATH: install Terraform (1.11 is tested) or OpenTofu, or set terraform to its path")
		}
		c.terraform = path
	} else if _, err := exec.LookPath(c.terraform); err != nil {
		return nil, sdk.Invalid("settings/terraform", "%s is not an executable this provider can run: install Terraform there, or set terraform to where it is", c.terraform)
	}
	c.providerMirror = s.ProviderMirror
	if c.providerMirror == "" {
		c.providerMirror = filepath.Join(dataDir, "providers")
	}
	var err error
	if c.staleLockAfter, err = duration(s.StaleLockAfter, 15*time.Minute, "settings/stale_lock_after"); err != nil {
		return nil, err
	}
	if c.timeout, err = duration(s.Timeout, 30*time.Minute, "settings/timeout"); err != nil {
		return nil, err
	}
	return c, nil
}

func duration(text string, fallback time.Duration, field string) (time.Duration, error) {
	if text == "" {
		return fallback, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, sdk.Invalid(field, "must be a duration such as 90s, 15m or 2h")
	}
	return d, nil
}
