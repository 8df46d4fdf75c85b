package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// ProtocolVersion is the version of the plugin contracts this sdk speaks. A host and a
// plugin agree on the highest version both know; a plugin that knows none of the host's
// versions is refused at start.
const ProtocolVersion = 1

// Kind is one of the three kinds of fedhost plugin.
type Kind string

// The plugin kinds. A plugin binary is named fedhost-<kind>-<name>.
const (
	KindResource  Kind = "resource"
	KindRegistrar Kind = "registrar"
	KindApp       Kind = "app"
)

// Kinds lists every kind, in the order the host shows them.
var Kinds = []Kind{KindResource, KindRegistrar, KindApp}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

// Description is what a plugin says of itself when the host starts it.
type Description struct {
	// Kind and Protocol are filled in by Serve.
	Kind     Kind
	Protocol int

	// Name is the plugin's name: lower case letters, digits and dashes, as in its binary
	// name fedhost-<kind>-<name>.
	Name string
	// Version is the plugin's own version, semantic versioning without a leading v.
	Version string
	// Summary is one line for people.
	Summary string
	// Serves names what the plugin answers: the resource types of a provider, the top
	// level domains of a registrar ("*" for any), the app name of an app.
	Serves []string
	// SettingsSchema is the JSON Schema of the plugin's settings (the settings block of
	// fedhost.hcl). Empty means the plugin takes no settings.
	SettingsSchema json.RawMessage
}

// validVersion reports whether v is MAJOR.MINOR.PATCH with an optional -pre or +build.
func validVersion(v string) bool {
	core := v
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		if i == len(v)-1 {
			return false
		}
		core = v[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// Validate checks the fields a host relies on. It names the first wrong field.
func (d Description) Validate() error {
	switch {
	case !d.Kind.Valid():
		return Invalid("kind", "unknown plugin kind %q: want resource, registrar or app", d.Kind)
	case !dnsLabel(d.Name, 63):
		return Invalid("name", "plugin name %q is not lower case letters, digits and dashes starting with a letter", d.Name)
	case !validVersion(d.Version):
		return Invalid("version", "plugin version %q is not a semantic version such as 1.2.0", d.Version)
	case d.Protocol < 1:
		return Invalid("protocol", "protocol version %d is not a fedhost protocol version", d.Protocol)
	case len(d.Serves) == 0:
		return Invalid("serves", "the plugin says it serves nothing: list its resource types, top level domains or app name")
	}
	if len(d.SettingsSchema) > 0 && !json.Valid(d.SettingsSchema) {
		return Invalid("settings_schema", "the settings schema is not valid JSON")
	}
	return nil
}

// String gives kind/name@version, the way logs and errors name a plugin.
func (d Description) String() string {
	return fmt.Sprintf("%s/%s@%s", d.Kind, d.Name, d.Version)
}

// Configurer is the optional ability of a plugin of any kind to take settings: the
// settings block of fedhost.hcl, as JSON, after it passed the plugin's SettingsSchema. The
// host calls it once after start and again when the settings change.
type Configurer interface {
	Configure(ctx context.Context, settings json.RawMessage) error
}

// ValidTenant reports whether s can be a tenant: a deployment's namespace, the prefix of
// every object it owns on a shared server. Lower case letters, digits and dashes, at most
// 32, starting with a letter and not ending with a dash.
func ValidTenant(s string) bool { return dnsLabel(s, 32) }

// ValidInstance reports whether s can name a resource within a deployment: as a tenant,
// at most 63.
func ValidInstance(s string) bool { return dnsLabel(s, 63) }

// dnsLabel is a loop rather than a regexp: plugins check names on every call and compile
// no regexp at start.
func dnsLabel(s string, max int) bool {
	if len(s) == 0 || len(s) > max || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// DataDirEnv is the environment variable through which the host gives each plugin a
// directory of its own for state (keys, managed servers); see DataDir.
const DataDirEnv = "FEDHOST_PLUGIN_DATA_DIR"

// DataDir returns the plugin's own state directory, made by the host, or "" when the
// plugin runs without one (in a conformance test, say).
func DataDir() string { return os.Getenv(DataDirEnv) }
