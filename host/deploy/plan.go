package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// step is one resource of a plan: a request of an app or a node of it.
type step struct {
	App      string
	Name     string // instance name: <app>-<request> or <app>-<node>
	Request  string // the app's own name of the request or node
	Type     string
	Provider string
	Spec     json.RawMessage
	client   *resource.Client
	// DependsOn holds instance names.
	DependsOn []string
}

func (s step) hash() string {
	sum := sha256.Sum256(append([]byte(s.Type+"\x00"+s.Provider+"\x00"), s.Spec...))
	return hex.EncodeToString(sum[:])
}

// appPlan is what one enabled app needs.
type appPlan struct {
	App     *catalog.App
	Options json.RawMessage
	Steps   []step
	// Nodes are rendered from stub results for the plan's checks and its preview.
	Nodes []step
	// Host is the app's host name and URL its address on the front door; TLS is the
	// step of its certificate (frontdoor.go). All empty without a route provider.
	Host, URL string
	TLS       *step
	// routeNode and routePort are the node and port the front door sends Host to.
	routeNode, routePort string
}

// Change is one line of a preview.
type Change struct {
	Action   string `json:"action"` // create, change, unchanged, delete, keep
	Name     string `json:"name"`
	App      string `json:"app"`
	Type     string `json:"type"`
	Provider string `json:"provider"`
	Kind     string `json:"kind"` // resource or node
}

// Plan is what a submit would do, changing nothing.
type Plan struct {
	Changes []Change `json:"changes"`
}

// plan asks every enabled app for its requests, has the instance provider check the
// nodes the apps would render (against stub results where none exist yet), then routes
// each request and has its provider validate it. Nothing changes. The nodes come first:
// an app that cannot run on this instance provider is the most useful refusal.
//
// hosts holds the apps' host names; the front door's steps are planned for them, and the
// deployment's zone, if any, is returned, with its directory and issuer (identity.go).
func (e *Engine) plan(ctx context.Context, d store.Deployment, cfg catalog.Config, options map[string]json.RawMessage, existing map[string]json.RawMessage, versions map[string]string, hosts map[string]string) ([]*appPlan, *step, *identity, error) {
	var out []*appPlan
	names := make([]string, 0, len(cfg.Apps))
	for name, a := range cfg.Apps {
		if a.Enable {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		a, err := e.appAt(name, versions)
		if err != nil {
			return nil, nil, nil, err
		}
		c, err := a.Plugin.Client()
		if err != nil {
			return nil, nil, nil, err
		}
		reqs, err := c.App().Requests(ctx, app.RequestsRequest{Tenant: d.Namespace, Domain: cfg.Domain, Config: options[name]})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("app %s: resource requests: %w", name, err)
		}
		ap := &appPlan{App: a, Options: options[name]}
		if host, ok := hosts[name]; ok {
			ap.Host, ap.URL = host, e.publicURL(host)
		}
		for _, r := range reqs {
			deps := make([]string, len(r.DependsOn))
			for i, dep := range r.DependsOn {
				deps[i] = name + "-" + dep
			}
			ap.Steps = append(ap.Steps, step{App: name, Name: name + "-" + r.Name, Request: r.Name, Type: r.Type, Spec: r.Spec, DependsOn: deps})
		}
		if err := order(ap.Steps); err != nil {
			return nil, nil, nil, fmt.Errorf("app %s: %w", name, err)
		}
		if ap.Nodes, err = e.render(ctx, d, cfg.Domain, ap, stubResults(ap.Steps, existing)); err != nil {
			return nil, nil, nil, err
		}
		urlInRequests(ap)
		for i := range ap.Steps {
			s := &ap.Steps[i]
			if s.client, s.Provider, err = e.route(s.Type); err != nil {
				return nil, nil, nil, fmt.Errorf("app %s, request %s: %w", name, s.Request, err)
			}
			if s.Type == contract.OIDC {
				continue // validated once the host has completed it (planIdentity)
			}
			if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
				return nil, nil, nil, fmt.Errorf("app %s, request %s (%s by %s): %w", name, s.Request, s.Type, s.Provider, err)
			}
		}
		out = append(out, ap)
	}
	id, err := e.planIdentity(ctx, cfg.Domain, out, existing)
	if err != nil {
		return nil, nil, nil, err
	}
	if raw, ok := existing[authTLSInstance]; ok && id.sso() {
		// The nodes as a build gives them the issuer's CA, for the preview to compare.
		var cert contract.TLSResult
		if json.Unmarshal(raw, &cert) == nil {
			for _, ap := range out {
				if ap.signsIn() {
					if err := trustCA(ap.Nodes, cert.CA); err != nil {
						return nil, nil, nil, err
					}
				}
			}
		}
	}
	if id.sso() && e.has(contract.Route) {
		with := map[string]string{"": id.AuthHost}
		maps.Copy(with, hosts)
		hosts = with // the issuer's record, in the deployment's zone
	}
	dns, err := e.planFrontDoor(ctx, cfg.Domain, hosts, out, existing)
	if err != nil {
		return nil, nil, nil, err
	}
	return out, dns, id, nil
}

// order sorts steps by type rank, then so that each comes after what it depends on.
func order(steps []step) error {
	sort.SliceStable(steps, func(i, j int) bool { return typeRank(steps[i].Type) < typeRank(steps[j].Type) })
	pos := map[string]int{}
	for i, s := range steps {
		pos[s.Name] = i
	}
	for _, s := range steps {
		for _, dep := range s.DependsOn {
			if _, ok := pos[dep]; !ok {
				return fmt.Errorf("request %s depends on %s, which the app does not request", s.Request, dep)
			}
		}
	}
	// The swaps below never end on a circle, so one is refused first.
	if c := circle(steps, pos); c != nil {
		return fmt.Errorf("requests %s depend on each other in a circle: the app must break it", strings.Join(c, ", "))
	}
	for moved := true; moved; {
		moved = false
		for i, s := range steps {
			for _, dep := range s.DependsOn {
				if j := pos[dep]; j > i {
					steps[i], steps[j] = steps[j], steps[i]
					pos[steps[i].Name], pos[steps[j].Name] = i, j
					moved = true
				}
			}
		}
	}
	return nil
}

// circle returns the requests of a circle of DependsOn, or nil.
func circle(steps []step, pos map[string]int) []string {
	const visiting, done = 1, 2
	state := map[string]int{}
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		switch state[name] {
		case visiting:
			for i, p := range path {
				if p == name {
					out := make([]string, 0, len(path)-i)
					for _, q := range path[i:] {
						out = append(out, steps[pos[q]].Request)
					}
					return out
				}
			}
		case done:
			return nil
		}
		state[name] = visiting
		path = append(path, name)
		for _, dep := range steps[pos[name]].DependsOn {
			if c := visit(dep); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return nil
	}
	for _, s := range steps {
		if c := visit(s.Name); c != nil {
			return c
		}
	}
	return nil
}

// render asks an app for its nodes given results, and routes and validates each node.
func (e *Engine) render(ctx context.Context, d store.Deployment, domain string, ap *appPlan, results map[string]json.RawMessage) ([]step, error) {
	c, err := ap.App.Plugin.Client()
	if err != nil {
		return nil, err
	}
	nodes, err := c.App().Render(ctx, app.RenderRequest{Tenant: d.Namespace, Domain: domain, Config: ap.Options, Results: results})
	if err != nil {
		return nil, fmt.Errorf("app %s: rendering its nodes: %w", ap.App.Name, err)
	}
	client, provider, err := e.route(contract.Instance)
	if err != nil {
		return nil, fmt.Errorf("app %s: %w", ap.App.Name, err)
	}
	var out []step
	for _, n := range nodes {
		out = append(out, step{App: ap.App.Name, Name: ap.App.Name + "-" + n.Name, Request: n.Name, Type: contract.Instance,
			Provider: provider, Spec: n.Spec, client: client})
	}
	routeURL(ap, out)
	for _, n := range out {
		if err := checkNode(n.Spec); err != nil {
			return nil, refuse(CodeInvalidConfiguration, "", "app %s, node %s: %v; the configuration asks for more than a node can be given: shorten the options that fill it", ap.App.Name, n.Request, err)
		}
		if err := client.Validate(ctx, contract.Instance, n.Spec); err != nil {
			return nil, fmt.Errorf("app %s, node %s, on instance provider %s: %w", ap.App.Name, n.Request, provider, err)
		}
	}
	return out, nil
}

// stubResults stands in for results not made yet, so that a plan can render the nodes and
// have the instance provider check them before anything is provisioned.
func stubResults(steps []step, existing map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	pending := contract.SecretRef{Secret: "pending"}
	for _, s := range steps {
		if r, ok := existing[s.Name]; ok {
			out[s.Request] = r
			continue
		}
		var v any
		switch s.Type {
		case contract.Secret:
			var req contract.SecretRequest
			_ = json.Unmarshal(s.Spec, &req)
			files := map[string]contract.SecretFileResult{}
			for f := range req.Files {
				files[f] = contract.SecretFileResult{Ref: "pending/" + f, Version: 1}
			}
			v = contract.SecretResult{Files: files}
		case contract.PostgreSQL:
			v = contract.PostgreSQLResult{Host: "pending", Port: 5432, Database: s.Name, User: s.Name, Password: pending, SSLMode: "disable"}
		case contract.S3:
			var req contract.S3Request
			_ = json.Unmarshal(s.Spec, &req)
			buckets, keys := map[string]string{}, map[string]contract.S3Access{}
			for b := range req.Buckets {
				buckets[b] = "pending-" + b
			}
			for k := range req.Keys {
				keys[k] = contract.S3Access{AccessKeyID: "pending", SecretAccessKey: pending}
			}
			v = contract.S3Result{Endpoint: "http://pending", Region: "pending", Buckets: buckets, Keys: keys}
		case contract.Redis:
			v = contract.RedisResult{Host: "pending", Port: 6379, User: s.Name, Password: pending, KeyPrefix: "pending:"}
		case contract.SMTP:
			v = contract.SMTPResult{Host: "pending", Port: 25, User: s.Name, Password: pending, From: "pending@pending.invalid", TLS: "none"}
		case contract.DNS:
			var req contract.DNSRequest
			_ = json.Unmarshal(s.Spec, &req)
			v = contract.DNSResult{Zone: req.Zone, Nameservers: []string{}, Records: req.Records}
		case contract.TLS:
			v = contract.TLSResult{Certificate: "pending", Key: pending, NotAfter: "2000-01-01T00:00:00Z"}
		case contract.Route:
			v = contract.RouteResult{URLs: []string{"https://pending.invalid/"}}
		case contract.LDAP:
			v = contract.LDAPResult{URL: "ldap://pending", BaseDN: "dc=pending", UsersDN: "ou=users,dc=pending", GroupsDN: "ou=groups,dc=pending", BindDN: "cn=pending", BindPassword: pending}
		case contract.OIDC:
			v = contract.OIDCResult{Issuer: "https://pending.invalid", ClientID: "pending", ClientSecret: pending}
		default:
			v = map[string]any{}
		}
		raw, _ := json.Marshal(v)
		out[s.Request] = raw
	}
	return out
}

// Preview says what a submit of raw would create, change and delete. It changes nothing.
func (e *Engine) Preview(ctx context.Context, deploymentID string, raw json.RawMessage) (Plan, error) {
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return Plan{}, err
	}
	migrated, refs, _, err := e.validate(ctx, raw, e.revisionFor(d, false), e.madeFor(ctx, d), e.storedRefs(d))
	if err != nil {
		return Plan{}, err
	}
	cfg, err := catalog.ParseConfig(migrated)
	if err != nil {
		return Plan{}, err
	}
	options := map[string]json.RawMessage{}
	for name, a := range cfg.Apps {
		options[name] = placeholderOptions(a.OptionsOrEmpty(), name, refs)
	}
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return Plan{}, err
	}
	stored := map[string]store.Resource{}
	results := map[string]json.RawMessage{}
	for _, r := range rows {
		stored[r.Name] = r
		results[r.Name] = json.RawMessage(r.Result)
	}
	_, versions, err := e.revisionOf(ctx, d.CatalogRevision)
	if err != nil {
		return Plan{}, err
	}
	hosts, err := e.hostNames(ctx, migrated, e.revisionFor(d, false))
	if err != nil {
		return Plan{}, err
	}
	plans, dns, id, err := e.plan(ctx, d, cfg, options, results, versions, hosts)
	if err != nil {
		return Plan{}, refuse(CodeInvalidConfiguration, "", "%v", err)
	}
	var p Plan
	planned := map[string]bool{}
	add := func(s step, kind string) {
		planned[s.Name] = true
		action := "create"
		if r, ok := stored[s.Name]; ok {
			action = "change"
			if r.SpecHash == s.hash() && r.State == store.ResourceProvisioned {
				action = "unchanged"
			}
		}
		p.Changes = append(p.Changes, Change{Action: action, Name: s.Name, App: s.App, Type: s.Type, Provider: s.Provider, Kind: kind})
	}
	if dns != nil {
		add(*dns, "resource")
	}
	if id.Directory != nil {
		add(*id.Directory, "resource")
	}
	if id.Mail != nil {
		add(*id.Mail, "resource")
	}
	if id.AuthTLS != nil {
		add(*id.AuthTLS, "resource")
	}
	if id.sso() && e.has(contract.Route) {
		// Like an app's route, it is known once the provider says where it listens.
		planned[authRouteInstance] = true
		action := "create"
		if r, ok := stored[authRouteInstance]; ok {
			action = "unchanged"
			if r.State != store.ResourceProvisioned {
				action = "change"
			}
		}
		_, provider, _ := e.route(contract.Route)
		p.Changes = append(p.Changes, Change{Action: action, Name: authRouteInstance, Type: contract.Route, Provider: provider, Kind: "resource"})
	}
	for _, ap := range plans {
		for _, s := range ap.Steps {
			add(s, "resource")
		}
		unchanged := true
		if ap.TLS != nil {
			add(*ap.TLS, "resource")
			unchanged = p.Changes[len(p.Changes)-1].Action == "unchanged"
		}
		for _, n := range ap.Nodes {
			add(n, "node")
			unchanged = unchanged && p.Changes[len(p.Changes)-1].Action == "unchanged"
		}
		if ap.routeNode != "" && e.has(contract.Route) {
			// The route's spec holds the node's address, known once it runs: it is
			// unchanged when the node and the certificate are.
			name := ap.App.Name + "-route"
			planned[name] = true
			action := "create"
			if _, ok := stored[name]; ok {
				action = "change"
				if unchanged && stored[name].State == store.ResourceProvisioned {
					action = "unchanged"
				}
			}
			_, provider, _ := e.route(contract.Route)
			p.Changes = append(p.Changes, Change{Action: action, Name: name, App: ap.App.Name, Type: contract.Route, Provider: provider, Kind: "resource"})
		}
	}
	for _, r := range rows {
		if planned[r.Name] || r.State == store.ResourceRetained || (strings.HasSuffix(r.Name, resticSuffix) && cfg.Apps[r.App].Enable) {
			continue
		}
		action := "delete"
		if a, ok := cfg.Apps[r.App]; ok && !a.Enable && !a.DeleteData && r.Type != contract.Instance && !frontDoorType(r.Type) {
			action = "keep"
		}
		if r.Name == directoryInstance || r.Name == MailResource {
			action = "keep" // the operator's users and their mail go only with the deployment
		}
		kind := "resource"
		if r.Type == contract.Instance {
			kind = "node"
		}
		p.Changes = append(p.Changes, Change{Action: action, Name: r.Name, App: r.App, Type: r.Type, Provider: r.Provider, Kind: kind})
	}
	return p, nil
}

// placeholderOptions puts ${secret:REF} where the operator's secrets were taken out.
func placeholderOptions(opts json.RawMessage, app string, refs map[string]string) json.RawMessage {
	prefix := "/apps/" + app + "/options"
	var doc map[string]any
	if json.Unmarshal(opts, &doc) != nil {
		return opts
	}
	changed := false
	for pointer, ref := range refs {
		if len(pointer) <= len(prefix) || pointer[:len(prefix)] != prefix {
			continue
		}
		if catalog.SetPointer(doc, pointer[len(prefix):], "${secret:"+ref+"}") {
			changed = true
		}
	}
	if !changed {
		return opts
	}
	out, _ := json.Marshal(doc)
	return out
}

// Bounds of a node spec, below what Linux lets a process start with (128 KiB a string,
// about 2 MiB of arguments and environment together), whichever instance provider runs
// it, so that a configuration that fits none is refused before anything stops.
const (
	maxNodeString = 64 << 10
	maxNodeEnv    = 512 << 10
	maxNodeArgs   = 512 << 10
	maxNodeFile   = 1 << 20
	maxNodeFiles  = 8 << 20
)

// checkNode refuses a node spec over the bounds, naming the field.
func checkNode(spec json.RawMessage) error {
	var n contract.InstanceRequest
	if err := json.Unmarshal(spec, &n); err != nil {
		return fmt.Errorf("the node spec is not an instance request: %w", err)
	}
	total := 0
	for _, a := range n.Args {
		if len(a) > maxNodeString {
			return fmt.Errorf("an argument is %d bytes, over the %d KiB one may hold", len(a), maxNodeString>>10)
		}
		total += len(a) + 1
	}
	if total > maxNodeArgs {
		return fmt.Errorf("its arguments total %d bytes, over the %d KiB they may hold", total, maxNodeArgs>>10)
	}
	total = 0
	for _, k := range slices.Sorted(maps.Keys(n.Env)) {
		if len(k)+len(n.Env[k])+1 > maxNodeString {
			return fmt.Errorf("environment variable %s is %d bytes, over the %d KiB one may hold", k, len(k)+len(n.Env[k])+1, maxNodeString>>10)
		}
		total += len(k) + len(n.Env[k]) + 2
	}
	if total > maxNodeEnv {
		return fmt.Errorf("its environment totals %d bytes, over the %d KiB it may hold", total, maxNodeEnv>>10)
	}
	total = 0
	for _, name := range slices.Sorted(maps.Keys(n.Files)) {
		size := len(n.Files[name].Content)
		if size > maxNodeFile {
			return fmt.Errorf("file %s is %d bytes, over the %d MiB one may hold", name, size, maxNodeFile>>20)
		}
		total += size
	}
	if total > maxNodeFiles {
		return fmt.Errorf("its files total %d bytes, over the %d MiB they may hold", total, maxNodeFiles>>20)
	}
	return nil
}
