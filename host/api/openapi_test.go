package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/metrics"
	"github.com/fedhost/fedhost/sdk/schema"
)

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(openAPI, &doc), "openapi.json is not JSON")
	return doc
}

// object returns doc[keys[0]][keys[1]]..., failing the test when one is not an object.
func object(t *testing.T, doc map[string]any, keys ...string) map[string]any {
	t.Helper()
	cur := doc
	for i, k := range keys {
		next, ok := cur[k].(map[string]any)
		require.True(t, ok, "%s is not an object", strings.Join(keys[:i+1], "."))
		cur = next
	}
	return cur
}

// operations returns each operation of doc by "METHOD /path".
func operations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for path, item := range object(t, doc, "paths") {
		for method, op := range item.(map[string]any) {
			if slices.Contains(httpMethods, method) {
				out[strings.ToUpper(method)+" "+path] = op.(map[string]any)
			}
		}
		// Methods outside HTTP's own (Terraform's LOCK and UNLOCK), as OpenAPI 3.2's
		// additionalOperations names them.
		extra, _ := item.(map[string]any)["x-additionalOperations"].(map[string]any)
		for method, op := range extra {
			out[method+" "+path] = op.(map[string]any)
		}
	}
	return out
}

var fiberParam = regexp.MustCompile(`:([A-Za-z0-9_]+)(<[^>]*>)?\??`)

// openAPIPath turns a Fiber route path into an OpenAPI one: /builds/:id -> /builds/{id}.
func openAPIPath(path string) string { return fiberParam.ReplaceAllString(path, "{$1}") }

func TestOpenAPIDocumentShape(t *testing.T) {
	t.Parallel()
	doc := openAPIDoc(t)
	require.Equal(t, "3.1.0", doc["openapi"])
	info := object(t, doc, "info")
	require.NotEmpty(t, info["title"], "info.title")
	require.NotEmpty(t, info["version"], "info.version")
	schemes := object(t, doc, "components", "securitySchemes")
	tags := map[string]bool{}
	for _, tag := range doc["tags"].([]any) {
		tags[tag.(map[string]any)["name"].(string)] = true
	}

	ops := operations(t, doc)
	require.NotEmpty(t, ops)
	ids := map[string]string{}
	pathParam := regexp.MustCompile(`\{([^}]+)\}`)
	for key, op := range ops {
		method, path, _ := strings.Cut(key, " ")
		id, _ := op["operationId"].(string)
		require.NotEmpty(t, id, "%s: operationId", key)
		other, dup := ids[id]
		require.False(t, dup, "%s: operationId %s is also that of %s", key, id, other)
		ids[id] = key
		require.NotEmpty(t, op["summary"], "%s: summary", key)
		require.NotEmpty(t, op["tags"], "%s: tags", key)
		for _, tag := range op["tags"].([]any) {
			require.True(t, tags[tag.(string)], "%s: tag %v is not declared in tags", key, tag)
		}
		responses, _ := op["responses"].(map[string]any)
		require.NotEmpty(t, responses, "%s: responses", key)

		security, ok := op["security"].([]any)
		require.True(t, ok, "%s: every operation says its security, [] when public", key)
		for _, alt := range security {
			names := alt.(map[string]any)
			for name := range names {
				require.Contains(t, schemes, name, "%s: security scheme %s", key, name)
			}
			// A session needs its CSRF token on unsafe methods; a bearer token does not.
			if _, session := names["session"]; session && method != fiber.MethodGet {
				require.Contains(t, names, "csrf", "%s: a session request without its CSRF token", key)
			}
		}

		declared := map[string]bool{}
		params, _ := op["parameters"].([]any)
		for _, p := range params {
			p := p.(map[string]any)
			if p["in"] == "path" {
				declared[p["name"].(string)] = true
				require.Equal(t, true, p["required"], "%s: path parameter %s must be required", key, p["name"])
			}
		}
		inPath := map[string]bool{}
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			inPath[m[1]] = true
		}
		require.Equal(t, inPath, declared, "%s: path parameters", key)
	}
}

// TestOpenAPIReferencesResolve catches a $ref to a schema or response that is not there.
func TestOpenAPIReferencesResolve(t *testing.T) {
	t.Parallel()
	doc := openAPIDoc(t)
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				require.True(t, strings.HasPrefix(ref, "#/"), "%s: $ref %s is not local", at, ref)
				var cur any = doc
				for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					obj, _ := cur.(map[string]any)
					cur = obj[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
					require.NotNil(t, cur, "%s: $ref %s does not resolve", at, ref)
				}
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", doc)
}

// TestOpenAPISchemasCompile compiles every schema of the document, those of the
// components and those inline in the operations, as JSON Schema 2020-12.
func TestOpenAPISchemasCompile(t *testing.T) {
	t.Parallel()
	const url = "https://fedhost.invalid/api/v1/openapi.json"
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPI))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	require.NoError(t, c.AddResource(url, doc))

	var pointers []string
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
				if k == "schema" {
					pointers = append(pointers, p)
				} else {
					walk(p, e)
				}
			}
		case []any:
			for i, e := range v {
				walk(ptr+"/"+strconv.Itoa(i), e)
			}
		}
	}
	root := doc.(map[string]any)
	walk("/paths", root["paths"])
	walk("/components/responses", root["components"].(map[string]any)["responses"])
	for name := range object(t, root, "components", "schemas") {
		pointers = append(pointers, "/components/schemas/"+name)
	}
	sort.Strings(pointers)
	for _, p := range pointers {
		_, err := c.Compile(url + "#" + p)
		require.NoError(t, err, "schema at %s", p)
	}
}

// TestOpenAPISchemasMirrorTheGoTypes checks that each schema has exactly the JSON fields of
// the Go type the API answers or reads with.
func TestOpenAPISchemasMirrorTheGoTypes(t *testing.T) {
	t.Parallel()
	schemas := object(t, openAPIDoc(t), "components", "schemas")
	for name, v := range map[string]any{
		"Error":                 Error{},
		"ErrorDetail":           schema.Problem{},
		"Me":                    Me{},
		"User":                  User{},
		"LoginRequest":          LoginRequest{},
		"TokenRequest":          TokenRequest{},
		"TokenAnswer":           TokenAnswer{},
		"Token":                 Token{},
		"ChangePasswordRequest": ChangePasswordRequest{},
		"PasswordAnswer":        PasswordAnswer{},
		"AuditEvent":            AuditEvent{},
		"CreateUserRequest":     CreateUserRequest{},
		"Plugin":                Plugin{},
		"Job":                   Job{},
		"CatalogApp":            CatalogApp{},
		"Deployment":            Deployment{},
		"DeploymentSummary":     DeploymentSummary{},
		"Update":                Update{},
		"Backup":                Backup{},
		"BackupStatus":          deploy.BackupStatus{},
		"FrontDoorStatus":       deploy.FrontDoorStatus{},
		"AppFrontDoor":          deploy.AppFrontDoor{},
		"CertificateStatus":     deploy.CertificateStatus{},
		"ZoneStatus":            deploy.ZoneStatus{},
		"RecordStatus":          deploy.RecordStatus{},
		"Operation":             deploy.Operation{},
		"ExportRequest":         ExportRequest{},
		"ConfirmAnswer":         ConfirmAnswer{},
		"ExportAnswer":          ExportAnswer{},
		"ConfirmRequest":        ConfirmRequest{},
		"Resource":              Resource{},
		"Retained":              Retained{},
		"CreateRequest":         CreateRequest{},
		"Build":                 Build{},
		"Event":                 Event{},
		"ProgressEvent":         ProgressEvent{},
		"UpdatePolicy":          deploy.UpdatePolicy{},
		"Plan":                  deploy.Plan{},
		"Change":                deploy.Change{},
		"Unmigrated":            catalog.Unmigrated{},
		"Configuration":         catalog.Config{},
		"AppConfig":             catalog.AppConfig{},
		"DirectoryUser":         DirectoryUser{},
		"PendingLink":           PendingLink{},
		"PasswordLink":          PasswordLink{},
		"DirectoryGroup":        DirectoryGroup{},
		"GroupRole":             GroupRole{},
		"NewDirectoryUser":      NewDirectoryUser{},
		"NewUserAnswer":         NewUserAnswer{},
		"UsePasswordLink":       UsePasswordLink{},
		"AppOperation":          AppOperation{},
		"Run":                   Run{},
		"RunRequest":            RunRequest{},
		"OutputEvent":           OutputEvent{},
		"Schedule":              Schedule{},
		"ScheduleRequest":       ScheduleRequest{},
		"Registrars":            Registrars{},
		"DomainCheckRequest":    DomainCheckRequest{},
		"DomainQuote":           DomainQuote{},
		"Contact":               Contact{},
		"Domain":                Domain{},
		"DomainEvent":           DomainEvent{},
		"DomainRegisterRequest": DomainRegisterRequest{},
		"DomainRenewRequest":    DomainRenewRequest{},
		"DomainTransferRequest": DomainTransferRequest{},
		"DomainLockRequest":     DomainLockRequest{},
		"DomainRenewalRequest":  DomainRenewalRequest{},
		"AuthCodeAnswer":        AuthCodeAnswer{},
		"Usage":                 deploy.Usage{},
		"UsageEvent":            deploy.UsageEvent{},
		"UsagePeriod":           deploy.UsagePeriod{},
		"UsageTotal":            deploy.UsageTotal{},
		"Recipient":             Recipient{},
		"ImportRequest":         ImportRequest{},
		"ImportTransfer":        ImportTransfer{},
		"ImportPlan":            deploy.ImportPlan{},
		"ImportedApp":           deploy.ImportedApp{},
		"ImportedRename":        deploy.ImportedRename{},
		"ImportedDomain":        deploy.ImportedDomain{},
	} {
		t.Run(name, func(t *testing.T) {
			schema, ok := schemas[name].(map[string]any)
			require.True(t, ok, "no schema %s", name)
			var documented []string
			for field := range object(t, schema, "properties") {
				documented = append(documented, field)
			}
			sort.Strings(documented)
			require.Equal(t, jsonFields(reflect.TypeOf(v)), documented)
		})
	}
}

// jsonFields returns the names encoding/json gives the fields of t, with those of
// embedded structs (api.Job embeds Build).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
		case !f.IsExported():
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func TestOpenAPIIsServed(t *testing.T) {
	t.Parallel()
	app := fiber.New()
	app.Get("/api/v1/openapi.json", openAPIHandler)
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	require.JSONEq(t, string(openAPI), string(body))
}

// TestOpenAPIDescribesEveryRoute fails when the API registers a route the document does
// not describe, or the document describes one the API does not register.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	// Registering the routes uses no dependency: no handler runs here.
	app := fiber.New(Config(DefaultServer))
	Mount(app, Deps{Metrics: metrics.New(nil)})

	registered := map[string]bool{}
	for _, r := range app.GetRoutes(true) {
		if r.Method == fiber.MethodHead || (r.Path != "/healthz" && r.Path != "/metrics" && !strings.HasPrefix(r.Path, "/api/v1")) {
			continue
		}
		registered[r.Method+" "+openAPIPath(r.Path)] = true
	}
	documented := map[string]bool{}
	for key := range operations(t, openAPIDoc(t)) {
		if !strings.HasPrefix(key, fiber.MethodHead+" ") {
			documented[key] = true
		}
	}

	var undocumented, unregistered []string
	for key := range registered {
		if !documented[key] {
			undocumented = append(undocumented, key)
		}
	}
	for key := range documented {
		if !registered[key] {
			unregistered = append(unregistered, key)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unregistered)
	assert.Empty(t, undocumented, "routes the API registers that openapi.json does not describe")
	assert.Empty(t, unregistered, "operations openapi.json describes that the API does not register")
}

// TestOpenAPISecurityFollowsTheAuthorizationTable checks each route's documented security
// against its rule: public routes need nothing, the others a session or a token, and an
// owner or superuser route can answer 403.
func TestOpenAPISecurityFollowsTheAuthorizationTable(t *testing.T) {
	t.Parallel()
	rules := Mount(fiber.New(Config(DefaultServer)), Deps{})
	require.NotEmpty(t, rules)
	ops := operations(t, openAPIDoc(t))
	for _, r := range rules {
		key := r.Method + " /api/v1" + openAPIPath(r.Path)
		op, ok := ops[key]
		if !ok {
			continue // TestOpenAPIDescribesEveryRoute names it
		}
		security, _ := op["security"].([]any)
		if r.Access == Public {
			assert.Empty(t, security, "%s is public", key)
			continue
		}
		assert.NotEmpty(t, security, "%s needs a %s", key, r.Access)
		if r.Access == Owner || r.Access == Superuser {
			assert.Contains(t, op["responses"], "403", "%s is for the %s only", key, r.Access)
		}
	}
}
