package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/net/publicsuffix"

	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/schema"
)

// App is one app of the catalog.
type App struct {
	Name          string
	Version       string
	Summary       string
	Schema        json.RawMessage
	Icon          []byte
	IconMediaType string
	Renames       []app.Rename
	// Plugin runs the app.
	Plugin *plugins.Plugin
}

// Catalog is the apps of one set of loaded plugins, with their composed schema. Several
// versions of an app may be installed; the newest is offered, the others run the
// deployments still pinned to an older revision.
type Catalog struct {
	apps     []*App
	byName   map[string]*App
	versions map[string]map[string]*App
	schema   json.RawMessage
	compiled *jsonschema.Schema
	// hostNames is, by app, the option its schema marks x-hostname.
	hostNames map[string]hostNameOption

	// views caches At's catalogs by their set of versions.
	mu    sync.Mutex
	views map[string]*Catalog
}

// Load asks every app plugin of m (the newest version of each) for its schema and renames.
func Load(ctx context.Context, m *plugins.Manager) (*Catalog, error) {
	c := &Catalog{byName: map[string]*App{}, versions: map[string]map[string]*App{}}
	for _, p := range m.Plugins() {
		if p.Kind != sdk.KindApp {
			continue
		}
		newest, _ := m.Find(sdk.KindApp, p.Name, "")
		cl, err := p.Client()
		if err != nil {
			return nil, err
		}
		desc := p.Description()
		sc, err := cl.App().Schema(ctx)
		if err != nil {
			return nil, fmt.Errorf("app %s: schema: %w", desc, err)
		}
		if _, err := schema.Compile(desc.Name+".json", sc.JSON); err != nil {
			return nil, fmt.Errorf("app %s: %w", desc, err)
		}
		renames, err := cl.App().Renames(ctx)
		if err != nil {
			return nil, fmt.Errorf("app %s: renames: %w", desc, err)
		}
		a := &App{Name: desc.Name, Version: desc.Version, Summary: desc.Summary, Schema: sc.JSON,
			Icon: sc.Icon, IconMediaType: sc.IconMediaType, Renames: renames, Plugin: p}
		if c.versions[a.Name] == nil {
			c.versions[a.Name] = map[string]*App{}
		}
		c.versions[a.Name][a.Version] = a
		if newest == p {
			c.apps = append(c.apps, a)
			c.byName[a.Name] = a
		}
	}
	sort.Slice(c.apps, func(i, j int) bool { return c.apps[i].Name < c.apps[j].Name })
	if err := c.compose(); err != nil {
		return nil, err
	}
	return c, nil
}

// At returns the catalog of a set of app versions, such as a catalog revision's: each app
// it names at that version, every other installed app at its newest. Its schema, renames
// and apps are those versions'; what validates a deployment's configuration must be the
// versions the deployment will run. It fails, naming the app and the plugin to install,
// when a version is not installed. Views are made once and cached.
func (c *Catalog) At(versions map[string]string) (*Catalog, error) {
	names := make([]string, 0, len(versions))
	for name := range versions {
		names = append(names, name)
	}
	sort.Strings(names)
	key := ""
	for _, name := range names {
		key += name + "=" + versions[name] + "\n"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.views[key]; ok {
		return v, nil
	}
	v := &Catalog{byName: map[string]*App{}, versions: c.versions}
	for _, newest := range c.apps {
		a := newest
		if want, ok := versions[newest.Name]; ok && want != newest.Version {
			if a, ok = c.versions[newest.Name][want]; !ok {
				return nil, fmt.Errorf("app %s %s is not installed: install fedhost-app-%s_%s, or apply updates", newest.Name, want, newest.Name, want)
			}
		}
		v.apps = append(v.apps, a)
		v.byName[a.Name] = a
	}
	if err := v.compose(); err != nil {
		return nil, err
	}
	if c.views == nil {
		c.views = map[string]*Catalog{}
	}
	c.views[key] = v
	return v, nil
}

// AppAt returns version of the app called name, if it is installed.
func (c *Catalog) AppAt(name, version string) (*App, bool) {
	a, ok := c.versions[name][version]
	return a, ok
}

// Revision is the catalog revision of the newest version of every app: an id derived
// from the set, so the same set always has the same id, and the set itself.
func (c *Catalog) Revision() (string, map[string]string) {
	apps := make(map[string]string, len(c.apps))
	lines := make([]string, 0, len(c.apps))
	for _, a := range c.apps {
		apps[a.Name] = a.Version
		lines = append(lines, a.Name+"="+a.Version+"\n")
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	return "r" + hex.EncodeToString(sum[:6]), apps
}

// Apps lists the apps by name.
func (c *Catalog) Apps() []*App { return c.apps }

// App returns the app called name.
func (c *Catalog) App(name string) (*App, bool) {
	a, ok := c.byName[name]
	return a, ok
}

// Schema is the composed deployment schema.
func (c *Catalog) Schema() json.RawMessage { return c.schema }

// DomainPattern is what the host accepts as a deployment's domain.
const DomainPattern = `^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`

func (c *Catalog) compose() error {
	apps := map[string]any{}
	var defs = map[string]any{}
	hostNames := map[string]hostNameOption{}
	for i, a := range c.apps {
		appSchema, err := ownResource(a.Name, a.Schema)
		if err != nil {
			return fmt.Errorf("app %s: schema: %w", a.Name, err)
		}
		opt, marked, err := hostNameOptionOf(a.Schema)
		if err != nil {
			return fmt.Errorf("app %s: schema: %w", a.Name, err)
		}
		if marked {
			hostNames[a.Name] = opt
		}
		defs[a.Name] = appSchema
		apps[a.Name] = map[string]any{
			"type":                 "object",
			"title":                a.Summary,
			"additionalProperties": false,
			"x-order":              i + 1,
			"properties": map[string]any{
				"enable": map[string]any{"type": "boolean", "title": "Enable " + a.Name, "default": false, "x-order": 1},
				"deleteData": map[string]any{"type": "boolean", "title": "Delete its data when disabled", "default": false, "x-order": 2,
					"description": "With the app disabled, the next deploy deletes its database, buckets and secrets. Without this, a disabled app keeps its data."},
				"options": map[string]any{"$ref": "#/$defs/" + a.Name, "x-order": 3},
			},
		}
	}
	doc := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"title":                "Deployment",
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"domain"},
		"properties": map[string]any{
			"domain": map[string]any{"type": "string", "title": "Domain", "x-order": 1, "pattern": DomainPattern, "maxLength": 253,
				"description": "The operator's domain, e.g. example.org; apps are served on it."},
			"apps": map[string]any{"type": "object", "title": "Applications", "x-order": 2, "additionalProperties": false,
				"properties": apps},
		},
		"$defs": defs,
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	compiled, err := schema.Compile("deployment.json", raw)
	if err != nil {
		return fmt.Errorf("composing the deployment schema: %w", err)
	}
	c.schema, c.compiled, c.hostNames = raw, compiled, hostNames
	return nil
}

// Validate checks a deployment configuration; the error names the JSON pointer of the
// first wrong value (as "config/...") and never the value.
func (c *Catalog) Validate(config json.RawMessage) error {
	return schema.Validate(c.compiled, "config", config)
}

// Check lists every problem of a deployment configuration, each at the JSON pointer of
// the value it concerns; none when it is valid.
func (c *Catalog) Check(config json.RawMessage) []schema.Problem {
	problems := schema.Check(c.compiled, config)
	var doc struct {
		Domain string `json:"domain"`
	}
	for _, p := range problems {
		if p.Location == "/domain" {
			return problems
		}
	}
	if json.Unmarshal(config, &doc) == nil && PublicSuffix(doc.Domain) {
		problems = append(problems, schema.Problem{Location: "/domain",
			Message: "Domain is a public suffix, under which others register their names: use a domain registered under it"})
		sort.SliceStable(problems, func(i, j int) bool { return problems[i].Location < problems[j].Location })
	}
	return problems
}

// PublicSuffix reports whether domain is a suffix of the Public Suffix List (co.uk,
// github.io) rather than a name registered under one. The list is the one
// golang.org/x/net/publicsuffix was built with.
func PublicSuffix(domain string) bool {
	if domain == "" || !strings.Contains(domain, ".") {
		return false
	}
	suffix, _ := publicsuffix.PublicSuffix(domain)
	return suffix == domain
}

// WithDefaults fills in the defaults of the composed schema at every depth; an enabled
// app without options gets its options' defaults. The configuration a deployment stores,
// and its apps, previews and exports see, is this one.
func (c *Catalog) WithDefaults(config json.RawMessage) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(config))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("configuration is not JSON: %w", err)
	}
	if obj, ok := doc.(map[string]any); ok {
		apps, _ := obj["apps"].(map[string]any)
		for _, v := range apps {
			if a, ok := v.(map[string]any); ok && a["enable"] == true {
				if _, has := a["options"]; !has {
					a["options"] = map[string]any{}
				}
			}
		}
	}
	return json.Marshal(schema.ApplyDefaults(c.compiled, doc))
}

// ownResource makes an app's schema a resource of its own inside the composed one: an $id
// (app-<name>.json, unless it has one), so that its local "#/$defs/..." references keep
// meaning its own definitions, and no $schema. Its members keep their order: the order of
// an app's properties is the order of its form.
func ownResource(name string, raw json.RawMessage) (json.RawMessage, error) {
	out, hasID, err := withoutKey(raw, "$schema")
	if err != nil || hasID {
		return out, err
	}
	id, _ := json.Marshal("app-" + name + ".json")
	rest := out[1:] // the members after "{", or just "}"
	if len(rest) > 1 {
		rest = append([]byte(","), rest...)
	}
	return append(append([]byte(`{"$id":`), id...), rest...), nil
}

// withoutKey returns the JSON object raw without key, its other members in their order,
// and whether it has an $id.
func withoutKey(raw json.RawMessage, key string) (json.RawMessage, bool, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, false, fmt.Errorf("not a JSON object")
	}
	var out bytes.Buffer
	hasID := false
	out.WriteByte('{')
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, false, err
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, false, err
		}
		hasID = hasID || t == "$id"
		if t == key {
			continue
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		name, _ := json.Marshal(t)
		out.Write(name)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	return out.Bytes(), hasID, nil
}
