package catalog

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/fedhost/fedhost/scheduler"
	"github.com/fedhost/fedhost/sdk/app"
)

// Config is a deployment configuration as the composed schema describes it.
type Config struct {
	Domain string               `json:"domain"`
	Apps   map[string]AppConfig `json:"apps,omitempty"`
}

// AppConfig is one app's part of a configuration.
type AppConfig struct {
	Enable     bool            `json:"enable"`
	DeleteData bool            `json:"deleteData"`
	Options    json.RawMessage `json:"options,omitempty"`
}

// ParseConfig reads a configuration that passed Validate.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// OptionsOrEmpty returns the app's options, "{}" when none are set.
func (a AppConfig) OptionsOrEmpty() json.RawMessage {
	if len(a.Options) == 0 || string(a.Options) == "null" {
		return json.RawMessage("{}")
	}
	return a.Options
}

// Unmigrated is a rename that could not move its value.
type Unmigrated struct {
	App    string `json:"app"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// RenameApplies reports whether rename r moves the options of a configuration made for
// app version from when it goes to version to: a rename without Since always does (every
// configuration), one with Since only on the way from a version below Since to one at or
// above it. An unknown from ("", a configuration of no recorded version) counts as below.
// A version that is not a semantic version cannot be placed, and the rename applies, as
// one without Since would.
func RenameApplies(r app.Rename, from, to string) bool {
	if r.Since == "" {
		return true
	}
	if c, err := scheduler.CompareVersions(to, r.Since); err == nil && c < 0 {
		return false // the target is still before the rename
	}
	if from == "" {
		return true
	}
	if c, err := scheduler.CompareVersions(from, r.Since); err == nil && c >= 0 {
		return false // the configuration was made with the new names already
	}
	return true
}

// ApplyRenames moves, in each app's options, the values at a rename's From to its To
// (JSON pointers within the options), in the order of the renames log; To may be under
// From. from is, by app, the version the configuration was made for (nil or a missing app:
// unknown): a rename applies only as RenameApplies says, from there to the catalog's
// version of the app. A rename whose target is already set, or whose target's parent is
// not an object, is reported and the value stays where it is.
func (c *Catalog) ApplyRenames(raw json.RawMessage, from map[string]string) (json.RawMessage, []Unmigrated, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("configuration is not a JSON object: %w", err)
	}
	apps, _ := doc["apps"].(map[string]any)
	var report []Unmigrated
	for name, v := range apps {
		a, ok := c.byName[name]
		if !ok || len(a.Renames) == 0 {
			continue
		}
		appCfg, _ := v.(map[string]any)
		opts, _ := appCfg["options"].(map[string]any)
		if opts == nil {
			continue
		}
		for _, r := range a.Renames {
			if !RenameApplies(r, from[name], a.Version) {
				continue
			}
			val, found := pointerGet(opts, r.From)
			if !found {
				continue
			}
			// The value leaves From first: To may be under it, as when a string becomes
			// an object of which it is one field (/smtp to /smtp/host).
			DeletePointer(opts, r.From)
			reason := ""
			if _, exists := pointerGet(opts, r.To); exists {
				reason = "the new option is already set"
			} else if !SetPointer(opts, r.To, val) {
				reason = "the new option's parent is not an object"
			}
			if reason != "" {
				SetPointer(opts, r.From, val) // its parents are still there
				report = append(report, Unmigrated{App: name, From: r.From, To: r.To, Reason: reason})
			}
		}
	}
	out, err := json.Marshal(doc)
	return out, report, err
}

// RenameSecrets moves the references of stored secrets as ApplyRenames moves options,
// with the same from. refs holds them by pointer (/apps/<app>/options/...), as the host
// keeps them outside the configuration; a reference at a rename's From, or under it, goes
// to its To, or under it, as the value it stood for would have. One whose new pointer
// holds a reference already stays where it is. refs itself is not changed.
func (c *Catalog) RenameSecrets(refs, from map[string]string) map[string]string {
	out := maps.Clone(refs)
	if out == nil {
		out = map[string]string{}
	}
	// The order of the apps does not matter: a rename moves only its own app's pointers.
	for name, a := range c.byName {
		prefix := "/apps/" + name + "/options"
		for _, r := range a.Renames {
			if !RenameApplies(r, from[name], a.Version) {
				continue
			}
			oldAt, newAt := prefix+r.From, prefix+r.To
			moved := map[string]string{} // old pointer -> reference
			for p, ref := range out {
				if p == oldAt || strings.HasPrefix(p, oldAt+"/") {
					moved[p] = ref
				}
			}
			// They leave first: To may be under From, as in ApplyRenames.
			for p := range moved {
				delete(out, p)
			}
			for p, ref := range moved {
				to := newAt + p[len(oldAt):]
				if _, taken := out[to]; taken {
					to = p
				}
				out[to] = ref
			}
		}
	}
	return out
}

func tokens(pointer string) []string {
	pointer = strings.TrimPrefix(pointer, "/")
	if pointer == "" {
		return nil
	}
	parts := strings.Split(pointer, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts
}

// GetPointer returns the value at a JSON pointer of object members in doc, if it is there.
func GetPointer(doc map[string]any, pointer string) (any, bool) { return pointerGet(doc, pointer) }

func pointerGet(doc map[string]any, pointer string) (any, bool) {
	var cur any = doc
	for _, t := range tokens(pointer) {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[t]; !ok {
			return nil, false
		}
	}
	return cur, len(tokens(pointer)) > 0
}

// SetPointer sets the value at a JSON pointer in doc, making missing objects on the
// way; it reports false when a parent is not an object.
func SetPointer(doc map[string]any, pointer string, v any) bool {
	toks := tokens(pointer)
	if len(toks) == 0 {
		return false
	}
	cur := doc
	for _, t := range toks[:len(toks)-1] {
		next, ok := cur[t]
		if !ok {
			m := map[string]any{}
			cur[t] = m
			cur = m
			continue
		}
		if cur, ok = next.(map[string]any); !ok {
			return false
		}
	}
	cur[toks[len(toks)-1]] = v
	return true
}

// DeletePointer removes the value at a JSON pointer in doc, if it is there.
func DeletePointer(doc map[string]any, pointer string) {
	toks := tokens(pointer)
	if len(toks) == 0 {
		return
	}
	cur := doc
	for _, t := range toks[:len(toks)-1] {
		next, ok := cur[t].(map[string]any)
		if !ok {
			return
		}
		cur = next
	}
	delete(cur, toks[len(toks)-1])
}
