package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/schema"
)

// AppCase is one example configuration of an app, as an operator would fill in its form.
type AppCase struct {
	// Name names the case in failures ("defaults", "with-sso").
	Name string
	// Config is the app's options: the part of a deployment's configuration at
	// apps/<app>/options, before the host fills in the schema's defaults. Nil is {}.
	Config json.RawMessage
	// Domain is the deployment's domain; "example.org" when empty.
	Domain string
}

// optionsURL names the app's schema for the compiler; an absolute URL, so that errors do
// not name a file of the working directory.
const optionsURL = "https://app.fedhost.invalid/options.json"

// The tenant and domain App passes as the host would.
const (
	appTenant = "acme"
	appDomain = "example.org"
)

// The keywords of JSON Schema 2020-12 (and "definitions" of older drafts) whose values
// are schemas, by the shape of the value.
var (
	subschemaMaps   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	subschemaSingle = []string{"items", "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else",
		"unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	subschemaLists = []string{"prefixItems", "allOf", "anyOf", "oneOf"}
)

// widgets are the values of x-widget the form renderer knows (ui/form).
var widgets = []string{"textarea", "password", "email", "url", "checkboxes"}

// App runs the checks of an app plugin against the binary at path, the way the host uses
// it. Call Plugin first for the checks every kind shares; App does not repeat them.
//
//   - Schema: its options schema is JSON, compiles as JSON Schema 2020-12 with formats
//     asserted (as the host compiles it), describes an object, and every "default" at
//     every depth (properties, items, $defs, ...) validates against the schema it sits
//     in, once the defaults within it are filled in. The UI hints x-order (a number), x-widget (textarea, password, email, url,
//     checkboxes) and x-enumTitles (one string per enum value) are well-formed.
//   - Each case: the configuration, with the schema's defaults filled in as the host
//     does (properties of objects present, items of arrays, $ref and allOf; a missing
//     object is not made), validates against the schema. Requests gives requests with DNS-safe,
//     unique names, of known resource types (contract.Types, not instance), whose specs
//     validate against the sdk/contract schemas, and whose DependsOn name other
//     requests without a cycle. Render, given results made up from the contract's
//     result shapes, gives at least one node; each has a DNS-safe unique name and a
//     spec that validates against the instance contract, with a non-empty artifact, and
//     placeholders that name its own ports and files (${port:NAME}, ${url:NAME},
//     ${file:NAME}) and, in files only, secrets a result gave (${secret:REF}).
//   - Renames, where offered: From and To are JSON pointers, differ, To is an option of
//     the schema and From is not, no From is renamed twice, and no chain of renames
//     comes back to where it started.
//   - Operations and role groups, where offered: DNS-safe unique names and a
//     description; a role group gives at least one role. A version guard, where offered,
//     names the app version and known step and downgrade values.
//
// Writeable options (writeOnly) reach Requests and Render as ${secret:REF} placeholders,
// as the host hands them over. The plugin gets empty settings. Each failure names the
// case, the request, node or pointer concerned, and what to change. t may be a
// *testing.T, or a testing.TB of the caller's own to look at the failures (the App tests
// of this package do so).
func App(t testing.TB, path string, cases ...AppCase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := client.Start(ctx, path, client.WithEnv(sdk.DataDirEnv+"="+t.TempDir()))
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	defer p.Kill()
	a := p.App()
	if a == nil {
		t.Fatalf("%s is a %s plugin, not an app", path, p.Description().Kind)
	}
	if err := p.Configure(ctx, nil); err != nil {
		t.Fatalf("configure with empty settings: %v", err)
	}
	sc, err := a.Schema(ctx)
	if err != nil {
		t.Fatalf("Schema: %v", err)
	}
	k := &appKit{t: t, ctx: ctx, app: a}
	if !k.checkSchema(sc.JSON) {
		return
	}
	for i, c := range cases {
		if c.Name == "" {
			c.Name = "case " + strconv.Itoa(i)
		}
		k.checkCase(c)
	}
	k.checkRenames()
	k.checkExtras()
}

type appKit struct {
	t        testing.TB
	ctx      context.Context
	app      *app.Client
	doc      map[string]any
	compiled *jsonschema.Schema
}

// checkSchema reports whether the schema compiled, so that the cases can be checked.
func (k *appKit) checkSchema(raw json.RawMessage) bool {
	t := k.t
	t.Helper()
	if err := json.Unmarshal(raw, &k.doc); err != nil || k.doc == nil {
		t.Errorf("schema: Schema returned something that is not a JSON object (%v): return a JSON Schema 2020-12 document", err)
		return false
	}
	if s, ok := k.doc["$schema"]; ok && s != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf(`schema: $schema is %v: set it to "https://json-schema.org/draft/2020-12/schema", the draft the host compiles`, s)
	}
	if k.doc["type"] != "object" {
		t.Errorf(`schema: the options are an object: set "type": "object" at the top of the schema`)
	}
	c := schema.NewCompiler()
	if err := schema.Add(c, optionsURL, raw); err != nil {
		t.Errorf("schema: %v", err)
		return false
	}
	compiled, err := c.Compile(optionsURL)
	if err != nil {
		t.Errorf("schema: does not compile as JSON Schema 2020-12: %v", err)
		return false
	}
	k.compiled = compiled
	walkSchemas(k.doc, "", func(ptr string, s map[string]any) {
		k.checkHints(ptr, s)
		def, ok := s["default"]
		if !ok {
			return
		}
		sub, err := c.Compile(optionsURL + "#" + ptr)
		if err != nil {
			t.Errorf("schema: the schema at %q does not compile: %v", ptr, err)
			return
		}
		// The host fills in the defaults of what a default leaves out, as of any value.
		b, _ := json.Marshal(schema.ApplyDefaults(sub, deepCopy(def)))
		if err := schema.Validate(sub, "", b); err != nil {
			t.Errorf("schema: the default at %s/default does not validate against its own schema%s: %s: change the default or the constraint",
				ptr, within(sdk.FieldOf(err)), message(err))
		}
	})
	return true
}

// checkHints checks the form renderer's annotations of the schema at ptr.
func (k *appKit) checkHints(ptr string, s map[string]any) {
	t := k.t
	t.Helper()
	if o, ok := s["x-order"]; ok {
		if _, num := o.(float64); !num {
			t.Errorf("schema: x-order at %s is not a number: give the position of the field as an integer", orRoot(ptr))
		}
	}
	if w, ok := s["x-widget"]; ok {
		name, _ := w.(string)
		known := false
		for _, v := range widgets {
			known = known || v == name
		}
		if !known {
			t.Errorf("schema: x-widget at %s is not one of %s", orRoot(ptr), strings.Join(widgets, ", "))
		}
	}
	if et, ok := s["x-enumTitles"]; ok {
		titles, isList := et.([]any)
		enum, hasEnum := s["enum"].([]any)
		switch {
		case !hasEnum:
			t.Errorf("schema: x-enumTitles at %s has no enum beside it: put it in the schema that holds the enum", orRoot(ptr))
		case !isList || len(titles) != len(enum):
			t.Errorf("schema: x-enumTitles at %s must be a list of %d titles, one per enum value in the same order", orRoot(ptr), len(enum))
		default:
			for i, ti := range titles {
				if s, ok := ti.(string); !ok || strings.TrimSpace(s) == "" {
					t.Errorf("schema: x-enumTitles/%d at %s is not a title: give a non-empty string", i, orRoot(ptr))
				}
			}
		}
	}
}

// walkSchemas calls fn for the schema s at ptr and every schema within it.
func walkSchemas(s map[string]any, ptr string, fn func(string, map[string]any)) {
	fn(ptr, s)
	for _, kw := range subschemaMaps {
		m, _ := s[kw].(map[string]any)
		names := make([]string, 0, len(m))
		for name := range m {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if sub, ok := m[name].(map[string]any); ok {
				walkSchemas(sub, ptr+"/"+kw+"/"+escapePointer(name), fn)
			}
		}
	}
	for _, kw := range subschemaSingle {
		if sub, ok := s[kw].(map[string]any); ok {
			walkSchemas(sub, ptr+"/"+kw, fn)
		}
	}
	for _, kw := range subschemaLists {
		list, _ := s[kw].([]any)
		for i, e := range list {
			if sub, ok := e.(map[string]any); ok {
				walkSchemas(sub, ptr+"/"+kw+"/"+strconv.Itoa(i), fn)
			}
		}
	}
}

// checkCase checks one case and returns the nodes it rendered (nil when it failed
// before Render).
func (k *appKit) checkCase(c AppCase) []app.Node {
	t := k.t
	t.Helper()
	raw := c.Config
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg == nil {
		t.Errorf("%s: the case's Config is not a JSON object", c.Name)
		return nil
	}
	cfg = schema.ApplyDefaults(k.compiled, cfg).(map[string]any)
	filled, _ := json.Marshal(cfg)
	if err := schema.Validate(k.compiled, "options", filled); err != nil {
		t.Errorf("%s: the configuration (with the schema's defaults) does not validate: %s %s: fix the case or the schema",
			c.Name, sdk.FieldOf(err), message(err))
		return nil
	}
	refs := map[string]bool{}
	operatorSecrets(k.doc, k.doc, cfg, "", refs)
	config, _ := json.Marshal(cfg)
	domain := c.Domain
	if domain == "" {
		domain = appDomain
	}
	reqs, err := k.app.Requests(k.ctx, app.RequestsRequest{Tenant: appTenant, Domain: domain, Config: config})
	if err != nil {
		t.Errorf("%s: Requests: %v", c.Name, err)
		return nil
	}
	if !k.checkRequests(c.Name, reqs) {
		return nil
	}
	results := map[string]json.RawMessage{}
	for _, r := range reqs {
		res, err := fakeResult(r, refs)
		if err != nil {
			t.Errorf("%s: request %q: %v", c.Name, r.Name, err)
			return nil
		}
		results[r.Name] = res
	}
	nodes, err := k.app.Render(k.ctx, app.RenderRequest{Tenant: appTenant, Domain: domain, Config: config, Results: results})
	if err != nil {
		t.Errorf("%s: Render with a result for every request: %v", c.Name, err)
		return nil
	}
	if len(nodes) == 0 {
		t.Errorf("%s: Render gave no node: an app runs at least one", c.Name)
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		if !sdk.ValidInstance(n.Name) {
			t.Errorf("%s: node %d is named %q, which is not DNS-safe: use lower-case letters, digits and '-', starting with a letter", c.Name, i, n.Name)
		}
		if seen[n.Name] {
			t.Errorf("%s: two nodes are named %q: give each node its own name", c.Name, n.Name)
		}
		seen[n.Name] = true
		k.checkNode(c.Name, n, refs)
	}
	return nodes
}

// checkRequests reports whether the requests are sound enough to render from.
func (k *appKit) checkRequests(name string, reqs []app.ResourceRequest) bool {
	t := k.t
	t.Helper()
	ok := true
	byName := map[string]app.ResourceRequest{}
	for i, r := range reqs {
		if !sdk.ValidInstance(r.Name) {
			t.Errorf("%s: request %d is named %q, which is not DNS-safe: use lower-case letters, digits and '-', starting with a letter", name, i, r.Name)
			ok = false
		}
		if _, dup := byName[r.Name]; dup {
			t.Errorf("%s: two requests are named %q: give each request its own name", name, r.Name)
			ok = false
		}
		byName[r.Name] = r
		switch {
		case r.Type == contract.Instance:
			t.Errorf("%s: request %q asks for an instance: nodes come from Render, not from Requests", name, r.Name)
			ok = false
		case r.Type == contract.Route:
			t.Errorf("%s: request %q asks for a route: the host routes the app's host name (x-hostname) itself", name, r.Name)
			ok = false
		case !contract.Known(r.Type):
			t.Errorf("%s: request %q has unknown resource type %q: use one of %s (sdk/contract)", name, r.Name, r.Type, strings.Join(requestTypes(), ", "))
			ok = false
		default:
			if err := contract.ValidateRequest(r.Type, r.Spec); err != nil {
				t.Errorf("%s: request %q: its spec does not follow the %s contract at %s: %s", name, r.Name, r.Type, sdk.FieldOf(err), message(err))
				ok = false
			}
		}
	}
	for _, r := range reqs {
		for _, d := range r.DependsOn {
			if _, found := byName[d]; !found || d == r.Name {
				t.Errorf("%s: request %q depends on %q, which is not another request of this configuration", name, r.Name, d)
				ok = false
			}
		}
	}
	if cycle := dependencyCycle(reqs); cycle != nil {
		t.Errorf("%s: the requests depend on each other in a circle (%s): the host cannot order them", name, strings.Join(cycle, " -> "))
		ok = false
	}
	return ok
}

// dependencyCycle returns a circle of DependsOn, or nil.
func dependencyCycle(reqs []app.ResourceRequest) []string {
	deps := map[string][]string{}
	for _, r := range reqs {
		deps[r.Name] = r.DependsOn
	}
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var stack []string
	var visit func(string) []string
	visit = func(n string) []string {
		switch state[n] {
		case visiting:
			for i, s := range stack {
				if s == n {
					return append(append([]string{}, stack[i:]...), n)
				}
			}
		case done:
			return nil
		}
		state[n] = visiting
		stack = append(stack, n)
		for _, d := range deps[n] {
			if _, ok := deps[d]; ok {
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, r := range reqs {
		if c := visit(r.Name); c != nil {
			return c
		}
	}
	return nil
}

var (
	anyPlaceholder    = regexp.MustCompile(`\$\{([^}]*)\}`)
	secretPlaceholder = regexp.MustCompile(`\$\{secret:([^}]*)\}`)
)

func (k *appKit) checkNode(name string, n app.Node, refs map[string]bool) {
	t := k.t
	t.Helper()
	where := fmt.Sprintf("%s: node %q", name, n.Name)
	var spec contract.InstanceRequest
	if err := json.Unmarshal(n.Spec, &spec); err != nil {
		t.Errorf("%s: its spec is not a JSON instance request (sdk/contract.InstanceRequest): %v", where, err)
		return
	}
	if spec.Artifact.Binary == "" && spec.Artifact.Image == "" {
		t.Errorf("%s has an empty artifact: set artifact.binary (a program in the instance provider's artifacts_dir) or artifact.image (an OCI image)", where)
	} else if err := contract.ValidateRequest(contract.Instance, n.Spec); err != nil {
		t.Errorf("%s: its spec does not follow the instance contract at %s: %s", where, sdk.FieldOf(err), message(err))
	}
	ports := map[string]bool{}
	for _, p := range spec.Ports {
		ports[p.Name] = true
	}
	if spec.Health != nil && !ports[spec.Health.Port] {
		t.Errorf("%s checks health on port %q, which it does not declare in ports", where, spec.Health.Port)
	}
	check := func(field, s string) {
		for _, m := range anyPlaceholder.FindAllStringSubmatch(s, -1) {
			kind, arg, _ := strings.Cut(m[1], ":")
			switch {
			case kind == "host" && arg == "":
			case kind == "port" || kind == "url":
				if !ports[arg] {
					t.Errorf("%s: %s: ${%s} names no port of the node: declare it in ports", where, field, m[1])
				}
			case kind == "file":
				if _, ok := spec.Files[arg]; !ok {
					t.Errorf("%s: %s: ${%s} names no file of the node: declare it in files", where, field, m[1])
				}
			case kind == "secret":
				t.Errorf("%s: %s holds ${secret:...}: secrets go into files only; put it in a file and give its path with ${file:NAME}", where, field)
			default:
				t.Errorf("%s: %s holds ${%s}, which no instance provider knows: use ${host}, ${port:NAME}, ${url:NAME} or ${file:NAME}", where, field, m[1])
			}
		}
	}
	for i, a := range spec.Args {
		check("args/"+strconv.Itoa(i), a)
	}
	for _, e := range sortedKeys(spec.Env) {
		check("env/"+e, spec.Env[e])
	}
	for _, f := range sortedKeys(spec.Files) {
		content := spec.Files[f].Content
		for _, m := range secretPlaceholder.FindAllStringSubmatch(content, -1) {
			if !refs[m[1]] {
				t.Errorf("%s: files/%s names secret %q, which no result of this render gave: use the ref of a SecretRef or of a secret file result", where, f, m[1])
			}
		}
		if strings.Contains(secretPlaceholder.ReplaceAllString(content, ""), "${") {
			t.Errorf("%s: files/%s holds a placeholder other than ${secret:REF}, the only one files take", where, f)
		}
	}
}

func (k *appKit) checkRenames() {
	t := k.t
	t.Helper()
	renames, err := k.app.Renames(k.ctx)
	if err != nil {
		t.Errorf("Renames: %v", err)
		return
	}
	to := map[string]string{}
	for i, r := range renames {
		where := fmt.Sprintf("rename %d (%s -> %s)", i, r.From, r.To)
		okFrom, okTo := validPointer(r.From), validPointer(r.To)
		if !okFrom {
			t.Errorf("%s: From is not a JSON pointer into the options: write it as /name/sub, escaping ~ as ~0 and / as ~1", where)
		}
		if !okTo {
			t.Errorf("%s: To is not a JSON pointer into the options: write it as /name/sub, escaping ~ as ~0 and / as ~1", where)
		}
		if r.From == r.To {
			t.Errorf("%s: From and To are the same option: drop the rename", where)
		}
		if strings.TrimSpace(r.Since) == "" {
			t.Errorf("%s: Since is empty: give the app version that made the rename", where)
		}
		if _, dup := to[r.From]; dup {
			t.Errorf("%s: %s is renamed twice: keep one rename per old option", where, r.From)
		}
		to[r.From] = r.To
		if okTo && !hasOption(k.doc, r.To) {
			t.Errorf("%s: To names no option of the schema: a rename moves a value to an option the schema has", where)
		}
		if okFrom && hasOption(k.doc, r.From) {
			t.Errorf("%s: From is still an option of the schema: a rename moves an option that is gone", where)
		}
	}
	for from := range to {
		seen := map[string]bool{from: true}
		for at, ok := to[from]; ok; at, ok = to[at] {
			if seen[at] {
				t.Errorf("renames: the chain from %s comes back to %s: a value would move in a circle", from, at)
				break
			}
			seen[at] = true
		}
	}
}

func (k *appKit) checkExtras() {
	t := k.t
	t.Helper()
	ops, err := k.app.Operations(k.ctx)
	if err != nil {
		t.Errorf("Operations: %v", err)
	}
	seen := map[string]bool{}
	for i, op := range ops {
		if !sdk.ValidInstance(op.Name) {
			t.Errorf("operation %d is named %q, which is not DNS-safe: use lower-case letters, digits and '-', starting with a letter", i, op.Name)
		}
		if seen[op.Name] {
			t.Errorf("two operations are named %q: give each its own name", op.Name)
		}
		seen[op.Name] = true
		if strings.TrimSpace(op.Description) == "" {
			t.Errorf("operation %q has no description: say in one line what it does, for the operator who runs it", op.Name)
		}
	}
	groups, err := k.app.RoleGroups(k.ctx)
	if err != nil {
		t.Errorf("RoleGroups: %v", err)
	}
	seen = map[string]bool{}
	for i, g := range groups {
		if !sdk.ValidInstance(g.Name) {
			t.Errorf("role group %d is named %q, which is not DNS-safe: use lower-case letters, digits and '-', starting with a letter", i, g.Name)
		}
		if seen[g.Name] {
			t.Errorf("two role groups are named %q: give each its own name", g.Name)
		}
		seen[g.Name] = true
		if strings.TrimSpace(g.Description) == "" {
			t.Errorf("role group %q has no description: say who its members are and what they may do", g.Name)
		}
		if len(g.Roles) == 0 {
			t.Errorf("role group %q gives no role: list the app roles its members get", g.Name)
		}
		for j, r := range g.Roles {
			if strings.TrimSpace(r) == "" {
				t.Errorf("role group %q: role %d is empty", g.Name, j)
			}
		}
	}
	if seenOp := slices.ContainsFunc(ops, func(op app.Operation) bool { return op.Name == app.OperationSyncRoles }); seenOp {
		k.checkRoleSync(groups)
	}
	g, err := k.app.VersionGuard(k.ctx)
	if sdk.CodeOf(err) == sdk.CodeUnsupported {
		return
	}
	if err != nil {
		t.Errorf("VersionGuard: %v", err)
		return
	}
	if strings.TrimSpace(g.Version) == "" {
		t.Errorf("version guard: Version is empty: give the version of the app the plugin runs")
	}
	if g.MaxStep != "" && g.MaxStep != app.StepAny && g.MaxStep != app.StepMajor && g.MaxStep != app.StepMinor {
		t.Errorf("version guard: MaxStep %q is not one of any, major, minor", g.MaxStep)
	}
	if g.OnDowngrade != "" && g.OnDowngrade != app.DowngradeRefuse && g.OnDowngrade != app.DowngradeWarn {
		t.Errorf("version guard: OnDowngrade %q is not one of refuse, warn", g.OnDowngrade)
	}
}

// checkRoleSync asks a RoleSyncer for its command with one member in each role group,
// and with none: each names a DNS-safe node.
func (k *appKit) checkRoleSync(groups []app.RoleGroup) {
	t := k.t
	t.Helper()
	if len(groups) == 0 {
		t.Errorf("%s: the app syncs roles but has no role groups: list them in RoleGroups", app.OperationSyncRoles)
		return
	}
	one, none := map[string][]string{}, map[string][]string{}
	for _, g := range groups {
		one[g.Name], none[g.Name] = []string{"alice"}, []string{}
	}
	for _, members := range []map[string][]string{one, none} {
		in, _ := json.Marshal(app.RoleSyncInput{Members: members})
		cmd, err := k.app.Command(k.ctx, app.CommandRequest{Operation: app.OperationSyncRoles, Input: in, Tenant: "acme", Domain: "acme.test", Config: json.RawMessage(`{}`)})
		if err != nil {
			t.Errorf("%s with members %s: %v", app.OperationSyncRoles, in, err)
			continue
		}
		if !sdk.ValidInstance(cmd.Node) {
			t.Errorf("%s: the command's node %q is not DNS-safe: name one of the nodes Render gives", app.OperationSyncRoles, cmd.Node)
		}
	}
}

// operatorSecrets replaces the string values of writeOnly options by ${secret:REF}, as the
// host hands them to an app, and adds each REF to refs.
func operatorSecrets(root, s map[string]any, cfg map[string]any, at string, refs map[string]bool) {
	props, _ := resolveRef(root, s)["properties"].(map[string]any)
	for _, name := range sortedKeys(cfg) {
		ps, _ := props[name].(map[string]any)
		if ps == nil {
			continue
		}
		ps = resolveRef(root, ps)
		if wo, _ := ps["writeOnly"].(bool); wo {
			if str, ok := cfg[name].(string); ok && str != "" {
				ref := "acme/operator/" + strings.Trim(strings.ReplaceAll(at+"/"+name, "/", "-"), "-") + "@v1"
				cfg[name] = "${secret:" + ref + "}"
				refs[ref] = true
			}
			continue
		}
		if sub, ok := cfg[name].(map[string]any); ok {
			operatorSecrets(root, ps, sub, at+"/"+name, refs)
		}
	}
}

// resolveRef follows a local $ref (#/...) of s; other schemas are returned as they are.
func resolveRef(root, s map[string]any) map[string]any {
	for range 32 {
		ref, ok := s["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") {
			return s
		}
		var at any = root
		for _, tok := range pointerTokens(strings.TrimPrefix(ref, "#")) {
			m, _ := at.(map[string]any)
			at = m[tok]
		}
		next, ok := at.(map[string]any)
		if !ok {
			return s
		}
		s = next
	}
	return s
}

// hasOption reports whether the JSON pointer names a property of the schema, through
// properties and local $refs.
func hasOption(root map[string]any, pointer string) bool {
	s := root
	for _, tok := range pointerTokens(pointer) {
		props, _ := resolveRef(root, s)["properties"].(map[string]any)
		next, ok := props[tok].(map[string]any)
		if !ok {
			return false
		}
		s = next
	}
	return true
}

// validPointer reports whether p is a non-empty JSON pointer (RFC 6901).
func validPointer(p string) bool {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	for _, tok := range strings.Split(p[1:], "/") {
		if tok == "" {
			return false
		}
	}
	return true
}

func pointerTokens(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	for i, t := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// within names the place inside a value an error points at, if any.
func within(field string) string {
	if field == "" {
		return ""
	}
	return " at " + field
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "the top of the schema"
	}
	return ptr
}

// message is an error's message without its field.
func message(err error) string {
	var serr *sdk.Error
	if errors.As(err, &serr) {
		return serr.Message
	}
	return err.Error()
}

// requestTypes are the resource types an app may request.
func requestTypes() []string {
	var out []string
	for _, typ := range contract.Types {
		if typ != contract.Instance && typ != contract.Route {
			out = append(out, typ)
		}
	}
	return out
}

// fakeResult makes up a result of r's type that follows its contract, as a provider would
// answer, and adds the secret references it holds to refs.
func fakeResult(r app.ResourceRequest, refs map[string]bool) (json.RawMessage, error) {
	ref := func(what string) contract.SecretRef {
		s := appTenant + "/" + r.Name + "/" + what + "@v1"
		refs[s] = true
		return contract.SecretRef{Secret: s}
	}
	decode := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(r.Spec))
		if len(r.Spec) == 0 {
			return nil
		}
		return dec.Decode(v)
	}
	var res any
	switch r.Type {
	case contract.Secret:
		var spec contract.SecretRequest
		if err := decode(&spec); err != nil {
			return nil, err
		}
		out := contract.SecretResult{Files: map[string]contract.SecretFileResult{}}
		for name, f := range spec.Files {
			fr := contract.SecretFileResult{Ref: ref(name).Secret, Version: 1}
			if f.Generate != nil && f.Generate.KeyPair != "" {
				fr.Public = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"
			}
			out.Files[name] = fr
		}
		res = out
	case contract.PostgreSQL:
		res = contract.PostgreSQLResult{Host: "127.0.0.1", Port: 5432, Database: appTenant + "-" + r.Name, User: appTenant + "-" + r.Name,
			Password: ref("password"), SSLMode: "disable"}
	case contract.S3:
		var spec contract.S3Request
		if err := decode(&spec); err != nil {
			return nil, err
		}
		out := contract.S3Result{Endpoint: "http://127.0.0.1:7070", Region: "us-east-1", PathStyle: true,
			Buckets: map[string]string{}, Keys: map[string]contract.S3Access{}}
		for b := range spec.Buckets {
			out.Buckets[b] = appTenant + "-" + b
		}
		for key := range spec.Keys {
			out.Keys[key] = contract.S3Access{AccessKeyID: "AK" + key, SecretAccessKey: ref("key-" + key)}
		}
		res = out
	case contract.Redis:
		res = contract.RedisResult{Host: "127.0.0.1", Port: 6379, User: appTenant + "-" + r.Name, Password: ref("password"), KeyPrefix: appTenant + ":" + r.Name + ":"}
	case contract.SMTP:
		var spec contract.SMTPRequest
		if err := decode(&spec); err != nil {
			return nil, err
		}
		res = contract.SMTPResult{Host: "127.0.0.1", Port: 1025, User: appTenant + "-" + r.Name, Password: ref("password"),
			From: spec.Sender + "@" + spec.Domain, TLS: "none"}
	case contract.DNS:
		var spec contract.DNSRequest
		if err := decode(&spec); err != nil {
			return nil, err
		}
		records := spec.Records
		if records == nil {
			records = []contract.DNSRecord{}
		}
		res = contract.DNSResult{Zone: spec.Zone, Nameservers: []string{"ns1.example.net"}, Records: records}
	case contract.TLS:
		res = contract.TLSResult{Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", Key: ref("key"), NotAfter: "2030-01-01T00:00:00Z"}
	case contract.LDAP:
		res = contract.LDAPResult{URL: "ldap://127.0.0.1:389", BaseDN: "ou=acme,dc=example,dc=org", UsersDN: "ou=users,ou=acme,dc=example,dc=org",
			GroupsDN: "ou=groups,ou=acme,dc=example,dc=org", BindDN: "cn=acme,dc=example,dc=org", BindPassword: ref("bind-password")}
	case contract.OIDC:
		res = contract.OIDCResult{Issuer: "https://id.example.org", ClientID: appTenant + "-" + r.Name, ClientSecret: ref("client-secret")}
	default:
		return nil, fmt.Errorf("no result can be made up for type %q", r.Type)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if err := contract.ValidateResult(r.Type, b); err != nil {
		return nil, fmt.Errorf("the made-up %s result does not follow its contract (a defect of the kit): %w", r.Type, err)
	}
	return b, nil
}
