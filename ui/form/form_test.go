package form_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/fedhost/fedhost/sdk/schema"
	"github.com/fedhost/fedhost/ui/form"
)

func listsSchema(t *testing.T) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "lists.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func render(t *testing.T, schema json.RawMessage, value string, opts form.Options) string {
	t.Helper()
	var v json.RawMessage
	if value != "" {
		v = json.RawMessage(value)
	}
	out, err := form.Render(schema, v, opts)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

const deploymentValue = `{
  "domain": "example.org",
  "apps": {
    "miniflux": {"enable": true, "deleteData": false, "options": {
      "adminUsername": "reader", "pollingFrequency": 30, "pollingScheduler": "entry_frequency",
      "fetchYouTubeWatchTime": true, "logLevel": "warning",
      "oidc": {"enable": true, "providerName": "Example <SSO>", "userCreation": false, "disableLocalAuth": false},
      "metrics": {"enable": true, "password": "never-rendered-secret", "allowedNetworks": ["10.0.0.0/8", "192.168.0.0/16"]}}},
    "mastodon": {"enable": false, "deleteData": true, "options": {
      "site_title": "Toots & more", "site_description": "First line.\nSecond line.",
      "registrations": "closed", "single_user_mode": false, "default_locale": "pt-BR",
      "authorized_fetch": true, "limited_federation_mode": false, "oidc_login": true, "oidc_only": true}}
  }
}`

func TestGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema func(*testing.T) json.RawMessage
		value  string
		opts   form.Options
	}{
		{
			name:   "miniflux",
			schema: func(t *testing.T) json.RawMessage { return appSchema(t, "miniflux") },
			value:  `{"adminUsername": "reader", "pollingFrequency": 3, "mediaProxyMode": "all", "oidc": {"enable": false}}`,
			opts:   form.Options{Errors: map[string]string{"/pollingFrequency": "must be at least 5"}},
		},
		{
			name:   "deployment",
			schema: func(t *testing.T) json.RawMessage { return deploymentSchema(t, "miniflux", "mastodon") },
			value:  deploymentValue,
			opts: form.Options{IDPrefix: "dep-", Errors: map[string]string{
				"/apps/miniflux/options/pollingFrequency": "must be at least 5",
				"/apps/mastodon/options":                  "oidc_only needs oidc_login",
			}},
		},
		{
			name:   "peertube",
			schema: func(t *testing.T) json.RawMessage { return appSchema(t, "peertube") },
		},
		{
			name:   "lists",
			schema: listsSchema,
			value:  `{"apiKey": "never-shown-0123456789", "ports": [8080, 8443], "relays": [{"url": "https://relay.example", "inbox": false, "tags": ["a"]}]}`,
			opts:   form.Options{SecretsSet: map[string]bool{"/apiKey": true}},
		},
		{name: "everything", schema: everythingSchema},
		{
			name:   "everything-errors",
			schema: everythingSchema,
			value:  `{"siteName": "ab", "contact": {"email": "x"}, "mirrors": [{"weight": 2}], "smtp": {"port": 25}}`,
			opts: form.Options{SecretsSet: map[string]bool{"/apiToken": true}, Errors: map[string]string{
				"/siteName":         "Site name must be at least 3 characters",
				"/contact/email":    "Contact e-mail must be an e-mail address",
				"/mirrors/0/url":    "Mirror URL is required: fill it in",
				"/mirrors/0/weight": "Weight must be at most 1",
				"/smtp/host":        "Mail server is required: fill it in",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			golden(t, tt.name, render(t, tt.schema(t), tt.value, tt.opts))
		})
	}
}

func everythingSchema(t *testing.T) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "formapp", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A form left untouched submits a document that is valid once the host has filled in the
// defaults: required fields with defaults are not required of the operator, and the
// optional object nobody touched (smtp, whose host is required) is not sent.
func TestUntouchedFormIsValidWithDefaults(t *testing.T) {
	t.Parallel()
	s := everythingSchema(t)
	p := parse(t, render(t, s, "", form.Options{}))
	for _, name := range []string{"/siteName", "/contact/email", "/contact/team"} {
		if hasAttr(p.control(name), "required") {
			t.Errorf("%s has a default but the browser is told it is required", name)
		}
	}
	if host := p.control("/smtp/host"); hasAttr(host, "required") || attrValue(host, "aria-required") != "true" {
		t.Error("the host of the optional smtp object stops the browser from submitting an untouched form, or is not announced as required")
	}
	raw, err := form.Decode(s, p.submit())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "smtp") {
		t.Errorf("the untouched optional object is sent: %s", raw)
	}
	compiled, err := schema.Compile("everything.json", s)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := decodeAny(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	filled, _ := json.Marshal(schema.ApplyDefaults(compiled, doc))
	if problems := schema.Check(compiled, filled); len(problems) > 0 {
		t.Errorf("the untouched form is refused: %v (sent %s)", problems, raw)
	}
	sameJSON(t, filled, []byte(`{"siteName": "Our site", "contact": {"email": "admin@example.org", "team": "ops"},
		"mode": "invite", "workers": 2, "tags": ["news"]}`))
}

// Fields come in the order the schema lists its properties; x-order moves one ahead.
func TestFieldsFollowTheSchemasOrder(t *testing.T) {
	t.Parallel()
	p := parse(t, render(t, everythingSchema(t), "", form.Options{}))
	var names []string
	for _, n := range p.all(func(n *html.Node) bool {
		return (n.Data == "input" || n.Data == "select" || n.Data == "textarea") && attrValue(n, "type") != "hidden" &&
			strings.Count(attrValue(n, "name"), "/") == 1
	}) {
		if name := attrValue(n, "name"); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	want := []string{"/debug", "/siteName", "/mode", "/workers", "/apiToken", "/about"}
	if !slices.Equal(names, want) {
		t.Errorf("top-level controls in order %v, want %v", names, want)
	}
}

// Every property of the Miniflux schema is a control named by its pointer, with a
// label naming it and its description linked.
func TestEveryMinifluxPropertyIsLabelled(t *testing.T) {
	t.Parallel()
	raw := appSchema(t, "miniflux")
	p := parse(t, render(t, raw, "", form.Options{}))

	type prop struct {
		ptr, title, description, typ string
	}
	var props []prop
	var walk func(ptr string, s map[string]any)
	walk = func(ptr string, s map[string]any) {
		ps, _ := s["properties"].(map[string]any)
		for name, v := range ps {
			ch := v.(map[string]any)
			typ, _ := ch["type"].(string)
			if typ == "object" && ch["properties"] != nil {
				walk(ptr+"/"+name, ch)
				continue
			}
			title, _ := ch["title"].(string)
			desc, _ := ch["description"].(string)
			props = append(props, prop{ptr + "/" + name, title, desc, typ})
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	walk("", doc)
	if len(props) < 16 {
		t.Fatalf("found %d properties in the Miniflux schema, it has at least 16: the test walks it wrongly", len(props))
	}
	for _, pr := range props {
		t.Run(pr.ptr, func(t *testing.T) {
			if pr.typ == "array" {
				lists := p.all(func(n *html.Node) bool { return attrValue(n, "data-array") == pr.ptr && n.Data == "fieldset" })
				if len(lists) != 1 || lists[0].FirstChild == nil || !strings.Contains(text(lists[0]), pr.title) {
					t.Fatalf("list %s is not a fieldset whose legend names it", pr.ptr)
				}
				return
			}
			c := p.control(pr.ptr)
			if c == nil {
				t.Fatalf("no single control named %s", pr.ptr)
			}
			id, _ := attrOf(c, "id")
			label := p.labelFor(id)
			if label == nil {
				t.Fatalf("control %s (id %q) has no label", pr.ptr, id)
			}
			if !strings.Contains(text(label), pr.title) {
				t.Errorf("label of %s is %q, want it to contain %q", pr.ptr, text(label), pr.title)
			}
			if pr.description != "" {
				described, _ := attrOf(c, "aria-describedby")
				help := p.byID(strings.Fields(described + " ")[0])
				if help == nil || text(help) != pr.description {
					t.Errorf("control %s: aria-describedby %q does not point at its description", pr.ptr, described)
				}
			}
			if pr.typ == "boolean" {
				if role, _ := attrOf(c, "role"); role != "switch" {
					t.Errorf("boolean %s has role %q, want switch", pr.ptr, role)
				}
			}
		})
	}
}

func TestEnumIsSelect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schema   json.RawMessage
		ptr      string
		options  []string
		titles   []string
		selected string
	}{
		{"typed enum, default selected", appSchema(t, "miniflux"), "/mediaProxyMode",
			[]string{"none", "http-only", "all"}, []string{"none", "http-only", "all"}, "http-only"},
		{"enum without type", appSchema(t, "mastodon"), "/registrations",
			[]string{"open", "approval", "closed"}, []string{"open", "approval", "closed"}, "approval"},
		{"integer enum with titles, no default", listsSchema(t), "/level",
			[]string{"", "1", "2", "3"}, []string{"(not set)", "Low", "Middle", "High"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := parse(t, render(t, tt.schema, "", form.Options{}))
			c := p.control(tt.ptr)
			if c == nil || c.Data != "select" {
				t.Fatalf("%s is not a select", tt.ptr)
			}
			var values, titles []string
			selected := ""
			for o := c.FirstChild; o != nil; o = o.NextSibling {
				if o.Type != html.ElementNode {
					continue
				}
				v, _ := attrOf(o, "value")
				values = append(values, v)
				titles = append(titles, text(o))
				if hasAttr(o, "selected") {
					selected = v
				}
			}
			if !slices.Equal(values, tt.options) || !slices.Equal(titles, tt.titles) {
				t.Errorf("options %q titled %q, want %q titled %q", values, titles, tt.options, tt.titles)
			}
			if selected != tt.selected {
				t.Errorf("selected %q, want %q", selected, tt.selected)
			}
		})
	}
}

func TestWriteOnlyNeverRendersValue(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-never-shown"
	tests := []struct {
		name     string
		schema   json.RawMessage
		value    string
		ptr      string
		set      bool
		required bool
	}{
		{"miniflux metrics password, stored", appSchema(t, "miniflux"),
			`{"metrics": {"enable": true, "password": "` + secret + `"}}`, "/metrics/password", true, false},
		{"miniflux metrics password, not stored", appSchema(t, "miniflux"),
			`{"metrics": {"enable": true, "password": "` + secret + `"}}`, "/metrics/password", false, false},
		{"required secret, stored", listsSchema(t), `{"apiKey": "` + secret + `"}`, "/apiKey", true, false},
		{"required secret, not stored", listsSchema(t), `{"apiKey": "` + secret + `"}`, "/apiKey", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := render(t, tt.schema, tt.value, form.Options{SecretsSet: map[string]bool{tt.ptr: tt.set}})
			if strings.Contains(out, secret) {
				t.Fatalf("the output contains the secret:\n%s", out)
			}
			p := parse(t, out)
			c := p.control(tt.ptr)
			if c == nil {
				t.Fatalf("no control %s", tt.ptr)
			}
			if typ, _ := attrOf(c, "type"); typ != "password" {
				t.Errorf("type %q, want password", typ)
			}
			if ac, _ := attrOf(c, "autocomplete"); ac != "new-password" {
				t.Errorf("autocomplete %q, want new-password", ac)
			}
			if hasAttr(c, "value") {
				t.Error("the password input has a value attribute")
			}
			id, _ := attrOf(c, "id")
			badge := p.all(func(n *html.Node) bool { return attrValue(n, "class") == "secret-set" && n.Parent == p.labelFor(id) })
			placeholder, _ := attrOf(c, "placeholder")
			if (len(badge) == 1) != tt.set || (placeholder == "leave empty to keep") != tt.set {
				t.Errorf("badge %v, placeholder %q; want badge and placeholder %v", len(badge) == 1, placeholder, tt.set)
			}
			// A stored secret may be left empty to keep it.
			if hasAttr(c, "required") != tt.required {
				t.Errorf("required=%v, want %v", hasAttr(c, "required"), tt.required)
			}
		})
	}
}

func TestErrorNextToField(t *testing.T) {
	t.Parallel()
	const ptr = "/apps/miniflux/options/pollingFrequency"
	const msg = "must be at least 5 <minutes>"
	out := render(t, deploymentSchema(t, "miniflux", "mastodon"), deploymentValue,
		form.Options{Errors: map[string]string{ptr: msg, "/nowhere": "lost"}})
	p := parse(t, out)
	c := p.control(ptr)
	if c == nil {
		t.Fatalf("no control %s", ptr)
	}
	if v, _ := attrOf(c, "aria-invalid"); v != "true" {
		t.Errorf("aria-invalid=%q, want true", v)
	}
	described, _ := attrOf(c, "aria-describedby")
	var errEl *html.Node
	for _, id := range strings.Fields(described) {
		if n := p.byID(id); n != nil && strings.Contains(" "+attrValue(n, "class")+" ", " field-error ") {
			errEl = n
		}
	}
	if errEl == nil {
		t.Fatalf("aria-describedby %q names no .field-error element", described)
	}
	if text(errEl) != msg {
		t.Errorf("error text %q, want %q", text(errEl), msg)
	}
	if errEl.Parent != c.Parent {
		t.Error("the error is not in the field's own element")
	}
	if others := p.all(func(n *html.Node) bool { return n != c && attrValue(n, "aria-invalid") == "true" }); len(others) != 0 {
		t.Errorf("%d other controls are marked invalid", len(others))
	}
	if !strings.Contains(out, "lost (/nowhere)") {
		t.Error("an error without a field is not shown above the form")
	}
}

func attrValue(n *html.Node, key string) string {
	v, _ := attrOf(n, key)
	return v
}

// An app's options are in a section the page hides while the app is off; deleteData
// shows while it is off. Hidden sections still submit.
func TestEnableSwitchShowsSections(t *testing.T) {
	t.Parallel()
	p := parse(t, render(t, deploymentSchema(t, "miniflux", "mastodon"), deploymentValue, form.Options{}))
	tests := []struct {
		attr, name string
		hidden     bool
	}{
		{"data-show-when", "/apps/miniflux/enable", false},
		{"data-show-unless", "/apps/miniflux/enable", true},
		{"data-show-when", "/apps/mastodon/enable", true},
		{"data-show-unless", "/apps/mastodon/enable", false},
		{"data-show-when", "/apps/miniflux/options/oidc/enable", false},
	}
	for _, tt := range tests {
		sections := p.all(func(n *html.Node) bool { return attrValue(n, tt.attr) == tt.name })
		if len(sections) != 1 {
			t.Errorf("%d sections with %s=%q, want 1", len(sections), tt.attr, tt.name)
			continue
		}
		if hasAttr(sections[0], "hidden") != tt.hidden {
			t.Errorf("section %s=%q: hidden=%v, want %v", tt.attr, tt.name, !tt.hidden, tt.hidden)
		}
		if sw := p.control(tt.name); sw == nil || attrValue(sw, "role") != "switch" {
			t.Errorf("%s names no switch", tt.name)
		}
	}
	withError := parse(t, render(t, deploymentSchema(t, "miniflux", "mastodon"), deploymentValue,
		form.Options{Errors: map[string]string{"/apps/mastodon/options/site_title": "too long"}}))
	shown := withError.all(func(n *html.Node) bool { return attrValue(n, "data-show-when") == "/apps/mastodon/enable" })
	if len(shown) != 1 || hasAttr(shown[0], "hidden") {
		t.Error("the options of a disabled app with an error are hidden")
	}
	sw := p.control("/apps/mastodon/enable")
	first := p.all(func(n *html.Node) bool {
		return n.Data == "input" && attrValue(n, "type") != "hidden" &&
			strings.HasPrefix(attrValue(n, "name"), "/apps/mastodon/")
	})
	if len(first) == 0 || first[0] != sw {
		t.Error("the app's enable switch is not its first control")
	}
}

// Decode(Render(value)) keeps every value given, but for those equal to their default,
// which the host fills in again: with the schema's defaults applied, the two are the same,
// and a second round changes nothing. Secrets are never rendered, so they come back only
// when typed again.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		schema  func(*testing.T) json.RawMessage
		value   string
		secrets []string // the pointers of value that are secrets, left out of the form
	}{
		{name: "deployment", schema: func(t *testing.T) json.RawMessage { return deploymentSchema(t, "miniflux", "mastodon") },
			value: deploymentValue, secrets: []string{"/apps/miniflux/options/metrics/password"}},
		{name: "peertube", schema: func(t *testing.T) json.RawMessage { return appSchema(t, "peertube") },
			value: `{"instance_name": "Tubes", "instance_terms": "\nLeading newline kept.", "signup": "open", "signup_limit": -1,
				"contact_form": false, "transcoding_threads": 4, "transcoding_resolutions": [],
				"transcoding_hls": false, "transcoding_web_videos": true, "import_http": true}`},
		{name: "lists", schema: listsSchema,
			value: `{"apiKey": "secret-0123456789", "ratio": 0.25, "level": 2, "trustedProxies": ["10.0.0.1", "10.0.0.2"], "ports": [8080],
				"relays": [{"url": "https://a.example", "inbox": false, "tags": ["x", "y"]}, {"url": "https://b.example"}]}`,
			secrets: []string{"/apiKey"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.schema(t)
			once, err := form.Decode(s, parse(t, render(t, s, tt.value, form.Options{})).submit())
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeAny(tt.value)
			if err != nil {
				t.Fatal(err)
			}
			for _, ptr := range tt.secrets {
				want = without(t, want, ptr)
			}
			got, err := decodeAny(string(once))
			if err != nil {
				t.Fatal(err)
			}
			want, got = withDefaults(t, s, want), withDefaults(t, s, got)
			if msg := contains(got, want, ""); msg != "" {
				t.Errorf("%s\n got: %s", msg, once)
			}
			twice, err := form.Decode(s, parse(t, render(t, s, string(once), form.Options{})).submit())
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, twice, once)
		})
	}
}

// withDefaults is v with the defaults of the schema filled in, as the host does.
func withDefaults(t *testing.T, s json.RawMessage, v any) any {
	t.Helper()
	compiled, err := schema.Compile("form.json", s)
	if err != nil {
		t.Fatal(err)
	}
	return schema.ApplyDefaults(compiled, v)
}

func decodeAny(s string) (any, error) {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

// without removes the value at a pointer of plain property names.
func without(t *testing.T, v any, ptr string) any {
	t.Helper()
	toks := strings.Split(ptr[1:], "/")
	cur := v
	for _, tok := range toks[:len(toks)-1] {
		cur = cur.(map[string]any)[tok]
	}
	delete(cur.(map[string]any), toks[len(toks)-1])
	return v
}

// contains says how got lacks a value of want: objects may have more properties, all
// else must be equal.
func contains(got, want any, ptr string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return ptr + ": not an object"
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return ptr + "/" + k + ": missing"
			}
			if msg := contains(gv, wv, ptr+"/"+k); msg != "" {
				return msg
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return ptr + ": not a list of the same length"
		}
		for i := range w {
			if msg := contains(g[i], w[i], ptr+"/"+strconv.Itoa(i)); msg != "" {
				return msg
			}
		}
		return ""
	}
	if !reflect.DeepEqual(got, want) {
		return ptr + ": got " + fmt.Sprint(got) + ", want " + fmt.Sprint(want)
	}
	return ""
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		form url.Values
		want string
	}{
		{"empty fields are left out, switches give false", url.Values{
			"/apiKey": {""}, "/ratio": {""}, "/level": {""}, "/trustedProxies": {""}, "/csrf": {"x"},
		}, `{"trustedProxies": []}`},
		{"rows in index order, removed rows leave gaps, empty scalar rows dropped, a switch at its default left out", url.Values{
			"/trustedProxies": {""}, "/trustedProxies/10": {"c"}, "/trustedProxies/2": {"b"}, "/trustedProxies/3": {""},
			"/relays": {""}, "/relays/1/url": {"https://x"}, "/relays/1/inbox": {"false", "true"},
		}, `{"trustedProxies": ["b", "c"], "relays": [{"url": "https://x"}]}`},
		{"an empty list without a default is left out, and so is the object it leaves empty", url.Values{
			"/relays": {""}, "/relays/0/tags": {""}, "/relays/1/url": {"https://y"}, "/relays/1/tags": {""},
		}, `{"relays": [{"url": "https://y"}]}`},
		{"checked switch wins over its hidden input", url.Values{"/relays/0/inbox": {"false"}},
			`{"relays": [{"inbox": false}]}`},
		{"number forms", url.Values{"/ports/0": {" 1e2 "}, "/ratio": {"1E-1"}, "/level": {"3"}},
			`{"ports": [100], "ratio": 0.1, "level": 3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := form.Decode(listsSchema(t), tt.form)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, []byte(tt.want))
		})
	}
}

func TestDecodeErrorNamesPointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema json.RawMessage
		form   url.Values
		ptr    string
	}{
		{"integer", deploymentSchema(t, "miniflux"), url.Values{"/domain": {"example.org"},
			"/apps/miniflux/options/pollingFrequency": {"hourly"}}, "/apps/miniflux/options/pollingFrequency"},
		{"fraction for an integer", appSchema(t, "miniflux"), url.Values{"/batchSize": {"2.5"}}, "/batchSize"},
		{"number", listsSchema(t), url.Values{"/ratio": {"half"}}, "/ratio"},
		{"row of an array", listsSchema(t), url.Values{"/ports/1": {"80x"}}, "/ports/1"},
		{"enum", listsSchema(t), url.Values{"/level": {"9"}}, "/level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := form.Decode(tt.schema, tt.form)
			var fe *form.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v, want a *form.Error", err)
			}
			if _, ok := fe.Fields[tt.ptr]; !ok || len(fe.Fields) != 1 {
				t.Errorf("fields %v, want only %s", fe.Fields, tt.ptr)
			}
			if !strings.Contains(err.Error(), tt.ptr) {
				t.Errorf("%q does not name %s", err, tt.ptr)
			}
			if typed := tt.form[tt.ptr][0]; strings.Contains(fe.Fields[tt.ptr], typed) {
				t.Errorf("%q echoes what was typed (%q)", fe.Fields[tt.ptr], typed)
			}
		})
	}
}

// Ids are unique, and every for and aria-describedby points at one.
func TestIDs(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]json.RawMessage{
		"deployment": deploymentSchema(t, "miniflux", "mastodon", "peertube"),
		"lists":      listsSchema(t),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := parse(t, render(t, s, "", form.Options{Errors: map[string]string{"/ports": "x"}}))
			seen := map[string]bool{}
			p.live(func(n *html.Node) {
				if id, ok := attrOf(n, "id"); ok {
					if seen[id] {
						t.Errorf("id %q used twice", id)
					}
					seen[id] = true
				}
			})
			p.live(func(n *html.Node) {
				refs := strings.Fields(attrValue(n, "aria-describedby"))
				if f, ok := attrOf(n, "for"); ok {
					refs = append(refs, f)
				}
				for _, id := range refs {
					if !seen[id] {
						t.Errorf("<%s> refers to id %q, which no element has", n.Data, id)
					}
				}
			})
		})
	}
}

func TestEscapes(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type": "object", "title": "<b>T</b>", "properties": {
		"a\"><x": {"type": "string", "title": "<script>alert(1)</script>", "description": "d & <i>", "default": "\"><img>"},
		"b": {"type": "string", "x-widget": "textarea"}}}`)
	out := render(t, schema, `{"b": "</textarea><script>x</script>"}`, form.Options{Errors: map[string]string{"/b": "<em>no</em>"}})
	for _, bad := range []string{"<script", "<b>", "<i>", "<img", "<x", "</textarea><", "<em>"} {
		if strings.Contains(out, bad) {
			t.Errorf("the output contains %q unescaped:\n%s", bad, out)
		}
	}
	p := parse(t, out)
	if p.control(`/a"><x`) == nil {
		t.Error("the control of a property with markup in its name is not named by its pointer")
	}
	if c := p.control("/b"); c == nil || text(c) != "</textarea><script>x</script>" {
		t.Error("the textarea does not hold its value as text")
	}
}

func TestArrayRows(t *testing.T) {
	t.Parallel()
	p := parse(t, render(t, listsSchema(t), `{"trustedProxies": ["a", "b", "c"], "ports": [1]}`, form.Options{}))
	tests := []struct {
		ptr               string
		rows              int
		addOff, removeOff bool
	}{
		{"/trustedProxies", 3, true, false}, // maxItems 3
		{"/ports", 1, false, true},          // minItems 1
		{"/relays", 0, false, false},
	}
	for _, tt := range tests {
		lists := p.all(func(n *html.Node) bool { return attrValue(n, "data-array") == tt.ptr })
		if len(lists) != 1 {
			t.Fatalf("no list %s", tt.ptr)
		}
		list := parse(t, renderNode(t, lists[0]))
		rows := list.all(func(n *html.Node) bool { return hasAttr(n, "data-array-row") && parentList(n) == tt.ptr })
		if len(rows) != tt.rows {
			t.Errorf("%s: %d rows, want %d", tt.ptr, len(rows), tt.rows)
		}
		for i, row := range rows {
			removes := parse(t, renderNode(t, row)).all(func(n *html.Node) bool { return hasAttr(n, "data-array-remove") })
			if len(removes) == 0 || hasAttr(removes[len(removes)-1], "disabled") != tt.removeOff {
				t.Errorf("%s row %d: remove button missing or disabled=%v", tt.ptr, i, !tt.removeOff)
			}
		}
		adds := list.all(func(n *html.Node) bool { return hasAttr(n, "data-array-add") && parentList(n) == tt.ptr })
		if len(adds) != 1 || hasAttr(adds[0], "disabled") != tt.addOff {
			t.Errorf("%s: add button missing or disabled=%v", tt.ptr, !tt.addOff)
		}
	}
	// A row's template has the index token in place of the index, one per level of nesting.
	tests2 := []struct{ value, want string }{
		{"", `name="/relays/__i0__/url"`},
		{"", `name="/relays/__i0__/tags/__i1__"`},
		{`{"relays": [{"url": "u"}]}`, `name="/relays/0/tags/__i0__"`},
	}
	for _, tt := range tests2 {
		if out := render(t, listsSchema(t), tt.value, form.Options{}); !strings.Contains(out, tt.want) {
			t.Errorf("value %s: no template input %s", tt.value, tt.want)
		}
	}
}

func parentList(n *html.Node) string {
	for p := n.Parent; p != nil; p = p.Parent {
		if v, ok := attrOf(p, "data-array"); ok {
			return v
		}
	}
	return ""
}

func renderNode(t *testing.T, n *html.Node) string {
	t.Helper()
	var b strings.Builder
	if err := html.Render(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A value that does not parse does not lose the others: the document comes back with
// every value that parsed, for the page to show again.
func TestDecodeErrorKeepsWhatParsed(t *testing.T) {
	t.Parallel()
	got, err := form.Decode(deploymentSchema(t, "miniflux"), url.Values{
		"/domain": {"example.org"},
		"/apps/miniflux/options/pollingFrequency": {"hourly"},
		"/apps/miniflux/options/batchSize":        {"250"},
		"/apps/miniflux/options/logLevel":         {"debug"},
	})
	var fe *form.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v, want a *form.Error", err)
	}
	var doc struct {
		Domain string `json:"domain"`
		Apps   struct {
			Miniflux struct {
				Options map[string]any `json:"options"`
			} `json:"miniflux"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	opts := doc.Apps.Miniflux.Options
	if doc.Domain != "example.org" || opts["batchSize"] != float64(250) || opts["logLevel"] != "debug" {
		t.Errorf("what parsed is lost: %s", got)
	}
	if _, ok := opts["pollingFrequency"]; ok {
		t.Errorf("the value that did not parse is in the document: %s", got)
	}
}
