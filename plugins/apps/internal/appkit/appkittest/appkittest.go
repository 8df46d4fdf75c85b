// Package appkittest runs the checks the three app plugins share against one app: the
// plugin conformance suite on its binary, its schema and defaults, its requests, and its
// node specs rendered from fabricated results.
package appkittest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Domain is the deployment domain the checks pass as the host would.
const Domain = "example.org"

// App is an app plugin with every optional ability the three apps have.
type App interface {
	app.App
	app.Guarded
	app.Operator
	app.RoleGrouper
}

// Case describes the app under test.
type Case struct {
	// Name is the app's name; the binary is built from the test's package.
	Name string
	// OIDC is the option document that turns single sign-on on.
	OIDC map[string]any
	// Wrong maps a JSON pointer to an option document that is wrong there.
	Wrong map[string]map[string]any
	// Nodes is how many nodes a render gives.
	Nodes int
	// Examples are realistic configurations an operator would give, for conformance.App
	// beside the defaults and OIDC.
	Examples []conformance.AppCase
}

// Run runs every check.
func Run(t *testing.T, a App, c Case) {
	t.Run("conformance", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "fedhost-app-"+c.Name)
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		desc := conformance.Plugin(t, bin)
		if desc.Name != c.Name || len(desc.Serves) != 1 || desc.Serves[0] != c.Name {
			t.Errorf("described as %q serving %v, want %q serving itself", desc.Name, desc.Serves, c.Name)
		}
		cases := append([]conformance.AppCase{{Name: "defaults"}, {Name: "oidc", Config: Config(c.OIDC)}}, c.Examples...)
		conformance.App(t, bin, cases...)
	})
	t.Run("schema", func(t *testing.T) { checkSchema(t, a) })
	t.Run("guard_groups_operations", func(t *testing.T) { checkExtras(t, a) })
	for _, cfg := range []struct {
		name string
		doc  map[string]any
	}{{"defaults", nil}, {"oidc", c.OIDC}} {
		t.Run("requests_"+cfg.name, func(t *testing.T) {
			reqs := checkRequests(t, a, Config(cfg.doc))
			hasOIDC := false
			for _, r := range reqs {
				hasOIDC = hasOIDC || r.Type == contract.OIDC
			}
			if hasOIDC != (cfg.doc != nil) {
				t.Errorf("an oidc request is there: %v, want %v", hasOIDC, cfg.doc != nil)
			}
		})
		t.Run("render_"+cfg.name, func(t *testing.T) { checkRender(t, a, Config(cfg.doc), c.Nodes) })
		t.Run("render_missing_result_"+cfg.name, func(t *testing.T) { checkMissing(t, a, Config(cfg.doc)) })
	}
	t.Run("host_name", func(t *testing.T) { checkHostName(t, a) })
	t.Run("wrong_options", func(t *testing.T) {
		for ptr, doc := range c.Wrong {
			_, err := requests(a, Config(doc))
			if sdk.CodeOf(err) != sdk.CodeInvalid || sdk.FieldOf(err) != ptr {
				t.Errorf("options %v: got %v, want an %s error at %s", doc, err, sdk.CodeInvalid, ptr)
			}
		}
		_, err := a.Requests(context.Background(), app.RequestsRequest{Tenant: "acme", Config: Config(nil)})
		if sdk.CodeOf(err) != sdk.CodeInvalid || sdk.FieldOf(err) != "domain" {
			t.Errorf("a request without the deployment's domain: got %v, want an error at domain", err)
		}
		_, err = requests(a, Config(map[string]any{"no_such_option": true}))
		if sdk.CodeOf(err) != sdk.CodeInvalid {
			t.Errorf("an unknown option: got %v, want an %s error", err, sdk.CodeInvalid)
		}
		_, err = requests(a, json.RawMessage(`[1]`))
		if sdk.CodeOf(err) != sdk.CodeInvalid {
			t.Errorf("a configuration that is not an object: got %v, want an %s error", err, sdk.CodeInvalid)
		}
	})
}

// Config returns the app's options as the host passes them: those in doc, nothing else
// (the app fills in defaults).
func Config(doc map[string]any) json.RawMessage {
	if doc == nil {
		doc = map[string]any{}
	}
	b, _ := json.Marshal(doc)
	return b
}

func requests(a App, config json.RawMessage) ([]app.ResourceRequest, error) {
	return a.Requests(context.Background(), app.RequestsRequest{Tenant: "acme", Domain: Domain, Config: config})
}

func render(a App, config json.RawMessage, results map[string]json.RawMessage) ([]app.Node, error) {
	return a.Render(context.Background(), app.RenderRequest{Tenant: "acme", Domain: Domain, Config: config, Results: results})
}

func checkSchema(t *testing.T, a App) {
	sc, err := a.Schema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Schema     string                     `json:"$schema"`
		Type       string                     `json:"type"`
		Additional *bool                      `json:"additionalProperties"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(sc.JSON, &top); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if top.Schema != "https://json-schema.org/draft/2020-12/schema" || top.Type != "object" || top.Additional == nil || *top.Additional {
		t.Errorf("schema must be a 2020-12 object schema with additionalProperties false")
	}
	for _, k := range appkit.HostKeys {
		if _, ok := top.Properties[k]; ok {
			t.Errorf("option %q is the host's", k)
		}
	}
	orders := map[int]string{}
	defaults := map[string]any{}
	for name, raw := range top.Properties {
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, k := range []string{"title", "description", "default", "x-order"} {
			if _, ok := p[k]; !ok {
				t.Errorf("option %s has no %s", name, k)
			}
		}
		if _, ok := p["readOnly"]; ok {
			t.Errorf("option %s is readOnly: the operator sets every option", name)
		}
		o, ok := p["x-order"].(float64)
		if !ok || o != float64(int(o)) {
			t.Errorf("option %s: x-order is not an integer", name)
		} else if other, dup := orders[int(o)]; dup {
			t.Errorf("options %s and %s share x-order %d", name, other, int(o))
		} else {
			orders[int(o)] = name
		}
		defaults[name] = p["default"]
	}
	// The defaults form a valid configuration, checked by a compiler of its own.
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc.JSON))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.AssertFormat()
	if err := comp.AddResource("app.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := comp.Compile("app.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	b, _ := json.Marshal(defaults)
	v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err := s.Validate(v); err != nil {
		t.Errorf("the defaults are not a valid configuration: %v", err)
	}
}

func checkExtras(t *testing.T, a App) {
	ctx := context.Background()
	g, err := a.VersionGuard(ctx)
	if err != nil || g.Version == "" || g.OnDowngrade != app.DowngradeRefuse {
		t.Errorf("version guard %+v, %v: want the app version and refused downgrades", g, err)
	}
	groups, err := a.RoleGroups(ctx)
	if err != nil || len(groups) == 0 {
		t.Fatalf("role groups %v, %v", groups, err)
	}
	admin := false
	for _, gr := range groups {
		if len(gr.Roles) == 0 || gr.Description == "" || !sdk.ValidInstance(gr.Name) {
			t.Errorf("role group %+v: want a DNS-safe name, a description and roles", gr)
		}
		admin = admin || (gr.Name == "application-admins" && strings.Contains(gr.Description, "first administrator is a member"))
	}
	if !admin {
		t.Errorf("application-admins does not say that the first administrator is a member")
	}
	ops, err := a.Operations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range ops {
		names = append(names, op.Name)
		if op.Sensitive || op.Description == "" {
			t.Errorf("operation %+v: want a description and output that is kept", op)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "backup,restore" {
		t.Errorf("operations %v, want backup and restore", names)
	}
}

func checkRequests(t *testing.T, a App, config json.RawMessage) []app.ResourceRequest {
	t.Helper()
	reqs, err := requests(a, config)
	if err != nil {
		t.Fatalf("requests: %v", err)
	}
	names := map[string]bool{}
	for _, r := range reqs {
		if !sdk.ValidInstance(r.Name) {
			t.Errorf("request name %q is not DNS-safe", r.Name)
		}
		if names[r.Name] {
			t.Errorf("request name %q is used twice", r.Name)
		}
		names[r.Name] = true
		if err := contract.ValidateRequest(r.Type, r.Spec); err != nil {
			t.Errorf("request %s (%s): %v", r.Name, r.Type, err)
		}
	}
	for _, r := range reqs {
		for _, d := range r.DependsOn {
			if !names[d] || d == r.Name {
				t.Errorf("request %s depends on %q, which is not another request", r.Name, d)
			}
		}
	}
	return reqs
}

// fakes fabricates a result for each request, and the secret values a provider would
// keep beside them, distinctive so that a leak is found.
type fakes struct {
	results map[string]json.RawMessage
	values  map[string]string // ref -> value
}

func (f *fakes) ref(instance, what string) string {
	ref := fmt.Sprintf("ref-%s-%s-q7z", instance, what)
	f.values[ref] = fmt.Sprintf("S3CR3T-VALUE-%d-of-%s-%s", len(f.values), instance, what)
	return ref
}

func fabricate(t *testing.T, reqs []app.ResourceRequest) *fakes {
	t.Helper()
	f := &fakes{results: map[string]json.RawMessage{}, values: map[string]string{}}
	for _, r := range reqs {
		var res any
		switch r.Type {
		case contract.Secret:
			var spec contract.SecretRequest
			mustUnmarshal(t, r.Spec, &spec)
			out := contract.SecretResult{Files: map[string]contract.SecretFileResult{}}
			for name, file := range spec.Files {
				fr := contract.SecretFileResult{Ref: f.ref(r.Name, name), Version: 1}
				if file.Generate != nil && file.Generate.KeyPair != "" {
					fr.Public = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"
				}
				out.Files[name] = fr
			}
			res = out
		case contract.PostgreSQL:
			res = contract.PostgreSQLResult{Host: "pg.internal", Port: 5432, Database: "acme-" + r.Name, User: "acme-" + r.Name,
				Password: contract.SecretRef{Secret: f.ref(r.Name, "password")}, SSLMode: "require"}
		case contract.Redis:
			res = contract.RedisResult{Host: "redis.internal", Port: 6379, User: "acme-" + r.Name,
				Password: contract.SecretRef{Secret: f.ref(r.Name, "password")}, KeyPrefix: "acme-" + r.Name + ":"}
		case contract.S3:
			var spec contract.S3Request
			mustUnmarshal(t, r.Spec, &spec)
			out := contract.S3Result{Endpoint: "https://s3.example.net", Region: "garage", PathStyle: true,
				Buckets: map[string]string{}, Keys: map[string]contract.S3Access{}}
			for b := range spec.Buckets {
				out.Buckets[b] = "acme-" + r.Name + "-" + b
			}
			for k := range spec.Keys {
				out.Keys[k] = contract.S3Access{AccessKeyID: "GK" + k + "0123", SecretAccessKey: contract.SecretRef{Secret: f.ref(r.Name, "key-"+k)}}
			}
			res = out
		case contract.SMTP:
			var spec contract.SMTPRequest
			mustUnmarshal(t, r.Spec, &spec)
			res = contract.SMTPResult{Host: "smtp.example.net", Port: 465, User: "acme-" + r.Name,
				Password: contract.SecretRef{Secret: f.ref(r.Name, "password")}, From: spec.Sender + "@" + spec.Domain, TLS: "tls"}
		case contract.DNS:
			var spec contract.DNSRequest
			mustUnmarshal(t, r.Spec, &spec)
			res = contract.DNSResult{Zone: spec.Zone, Nameservers: []string{"ns1.example.net"}, Records: spec.Records}
		case contract.TLS:
			res = contract.TLSResult{Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
				Key: contract.SecretRef{Secret: f.ref(r.Name, "key")}, NotAfter: "2030-01-01T00:00:00Z"}
		case contract.LDAP:
			res = contract.LDAPResult{URL: "ldaps://ldap.internal", BaseDN: "ou=acme,dc=example,dc=net",
				UsersDN: "ou=people,ou=acme,dc=example,dc=net", GroupsDN: "ou=groups,ou=acme,dc=example,dc=net",
				BindDN: "cn=bind,ou=acme,dc=example,dc=net", BindPassword: contract.SecretRef{Secret: f.ref(r.Name, "bind")}}
		case contract.OIDC:
			res = contract.OIDCResult{Issuer: "https://auth." + Domain, ClientID: "acme-" + r.Name,
				ClientSecret: contract.SecretRef{Secret: f.ref(r.Name, "client-secret")}}
		default:
			t.Fatalf("request %s: no fake result for type %s", r.Name, r.Type)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if err := contract.ValidateResult(r.Type, b); err != nil {
			t.Fatalf("fake %s result: %v", r.Type, err)
		}
		f.results[r.Name] = b
	}
	return f
}

var secretPlaceholder = regexp.MustCompile(`\$\{secret:([^}]*)\}`)

func checkRender(t *testing.T, a App, config json.RawMessage, want int) {
	reqs := checkRequests(t, a, config)
	f := fabricate(t, reqs)
	nodes, err := render(a, config, f.results)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if len(nodes) != want {
		t.Errorf("%d nodes, want %d", len(nodes), want)
	}
	used := map[string]bool{}
	names := map[string]bool{}
	for _, node := range nodes {
		i, raw := node.Name, node.Spec
		if !sdk.ValidInstance(i) || names[i] {
			t.Errorf("node name %q is not DNS-safe or not unique", i)
		}
		names[i] = true
		if err := contract.ValidateRequest(contract.Instance, raw); err != nil {
			t.Errorf("node %s: %v", i, err)
		}
		var n contract.InstanceRequest
		mustUnmarshal(t, raw, &n)
		if n.Artifact.Image == "" {
			t.Errorf("node %s has no image", i)
		}
		for value := range f.values {
			if strings.Contains(string(raw), f.values[value]) {
				t.Errorf("node %s holds a secret value", i)
			}
		}
		for k, v := range n.Env {
			if strings.Contains(v, "${secret:") {
				t.Errorf("node %s: env %s holds a secret placeholder; secrets go in files", i, k)
			}
		}
		for _, a := range n.Args {
			if strings.Contains(a, "${") {
				t.Errorf("node %s: an argument holds a placeholder, which only env and files take", i)
			}
		}
		for name, file := range n.Files {
			rest := file.Content
			for _, m := range secretPlaceholder.FindAllStringSubmatch(file.Content, -1) {
				if _, ok := f.values[m[1]]; !ok {
					t.Errorf("node %s: file %s names secret %q, which no result gave", i, name, m[1])
				}
				used[m[1]] = true
				rest = strings.ReplaceAll(rest, m[0], "")
			}
			if strings.Contains(rest, "${") {
				t.Errorf("node %s: file %s holds a placeholder the host does not know", i, name)
			}
		}
		// A reference appears only inside a placeholder.
		stripped := secretPlaceholder.ReplaceAllString(string(raw), "")
		for ref := range f.values {
			if strings.Contains(stripped, ref) {
				t.Errorf("node %s names secret reference %s outside a placeholder", i, ref)
			}
		}
		if n.Health != nil {
			found := false
			for _, p := range n.Ports {
				found = found || p.Name == n.Health.Port
			}
			if !found {
				t.Errorf("node %s checks health on port %q, which it does not have", i, n.Health.Port)
			}
		}
	}
	// Every secret of the secret requests reaches some node (nothing generated in vain).
	for _, r := range reqs {
		if r.Type != contract.Secret {
			continue
		}
		var res contract.SecretResult
		mustUnmarshal(t, f.results[r.Name], &res)
		for file, fr := range res.Files {
			if !used[fr.Ref] {
				t.Errorf("secret %s/%s reaches no node", r.Name, file)
			}
		}
	}
}

func checkMissing(t *testing.T, a App, config json.RawMessage) {
	reqs := checkRequests(t, a, config)
	f := fabricate(t, reqs)
	for _, r := range reqs {
		results := map[string]json.RawMessage{}
		for k, v := range f.results {
			if k != r.Name {
				results[k] = v
			}
		}
		_, err := render(a, config, results)
		var serr *sdk.Error
		if !errors.As(err, &serr) || serr.Code != sdk.CodeInvalid || serr.Field != "results/"+r.Name || !strings.Contains(serr.Message, r.Name) {
			t.Errorf("render without result %s: got %v, want an %s error naming it", r.Name, err, sdk.CodeInvalid)
		}
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// checkHostName checks that the option the schema marks x-hostname names the app's DNS
// record and certificate: the host judges that name, so the app must serve on it.
func checkHostName(t *testing.T, a App) {
	sc, err := a.Schema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Properties map[string]struct {
			HostName bool `json:"x-hostname"`
		} `json:"properties"`
	}
	mustUnmarshal(t, sc.JSON, &top)
	option := ""
	for name, p := range top.Properties {
		if p.HostName {
			option = name
		}
	}
	if option == "" {
		t.Fatal("no option is marked x-hostname: mark the one that holds the app's host name")
	}
	cfg := Config(map[string]any{option: "www.eu"})
	reqs := checkRequests(t, a, cfg)
	// The host's front door makes the zone's records, the certificate and the route of
	// the host name; an app that asks for them too would take the zone from it.
	for _, r := range reqs {
		if r.Type == contract.DNS || r.Type == contract.TLS || r.Type == contract.Route {
			t.Errorf("request %s is of type %s, which the host makes for the app's host name: drop it", r.Name, r.Type)
		}
	}
	nodes, err := render(a, cfg, fabricate(t, reqs).results)
	if err != nil {
		t.Fatal(err)
	}
	host := "www.eu." + Domain
	found := false
	for _, n := range nodes {
		found = found || strings.Contains(string(n.Spec), host)
	}
	if !found {
		t.Errorf("with %s www.eu no node is told its host name %s", option, host)
	}
}
