package form_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/fedhost/fedhost/ui/form"
)

// The fuzz targets use only Decode and Render and files, so that they stay when the
// package's insides change.

func fuzzSchema(f *testing.F, path string) json.RawMessage {
	f.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return raw
}

// appSchemas are the schemas the app plugins ship, as seeds of FuzzSchema.
func appSchemas(f *testing.F) []json.RawMessage {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "plugins", "apps", "*", "schema.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no app schemas: %v", err)
	}
	out := make([]json.RawMessage, len(paths))
	for i, p := range paths {
		out[i] = fuzzSchema(f, p)
	}
	return out
}

// checkDecoded checks Decode's answer: JSON whenever there is one, and an error only of
// a form the page can show again, with the document of what parsed.
func checkDecoded(t *testing.T, out json.RawMessage, err error, schemaValid bool) {
	t.Helper()
	var ferr *form.Error
	switch {
	case err == nil || errors.As(err, &ferr):
		if !json.Valid(out) {
			t.Fatalf("Decode returned invalid JSON %q (error %v)", out, err)
		}
	case schemaValid:
		t.Fatalf("Decode failed on a valid schema: %v", err)
	}
}

// dangerous are elements that run or load something; Render writes none of them.
var dangerous = map[string]bool{
	"script": true, "style": true, "iframe": true, "frame": true, "object": true, "embed": true,
	"img": true, "svg": true, "math": true, "a": true, "link": true, "meta": true, "base": true,
	"form": true, "video": true, "audio": true, "source": true, "image": true,
}

// checkHTML checks that the text and attribute values of the output are escaped: no
// element or attribute of the input's making, such as <script> or onmouseover.
func checkHTML(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(strings.ToLower(out), "<script") {
		t.Fatalf("the form holds <script:\n%s", out)
	}
	z := html.NewTokenizer(strings.NewReader(out))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if dangerous[tok.Data] {
				t.Fatalf("the form holds a <%s> element:\n%s", tok.Data, out)
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(a.Key, "on") || a.Key == "style" || a.Key == "src" || a.Key == "href" ||
					a.Key == "formaction" || a.Key == "srcdoc" {
					t.Fatalf("the form holds a %s attribute on <%s>:\n%s", a.Key, tok.Data, out)
				}
			}
		}
	}
}

// FuzzDecode decodes submissions (a form body, as the browser posts it) against the
// lists schema: arrays of scalars and objects, a $ref, numbers, an enum and secrets.
func FuzzDecode(f *testing.F) {
	schema := fuzzSchema(f, filepath.Join("testdata", "lists.schema.json"))
	for _, body := range []string{
		"",
		"csrf=x&%2FapiKey=&%2Fratio=&%2Flevel=&%2FtrustedProxies=",
		"%2FtrustedProxies=&%2FtrustedProxies%2F10=c&%2FtrustedProxies%2F2=b&%2FtrustedProxies%2F3=" +
			"&%2Frelays=&%2Frelays%2F1%2Furl=https%3A%2F%2Fx&%2Frelays%2F1%2Finbox=false&%2Frelays%2F1%2Finbox=true",
		"%2Fports%2F0=+1e2+&%2Fratio=1E-1&%2Flevel=3",
		"%2Fports%2F0=eighty&%2Fratio=NaN&%2Flevel=9&%2Frelays%2F0%2Finbox=maybe",
		"%2FapiKey=0123456789abcdef0123&%2Fports%2F00=1&%2Fports%2F-1=2&%2Fports%2F99999999999999999999=3",
		"%2Frelays%2F0%2Ftags%2F0=a&%2Frelays%2F0%2Ftags%2F1=%3Cscript%3E&%2Frelays%2F0%2Furl=%0D%0A",
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		values, _ := url.ParseQuery(body) // what parsed, as a server reads a malformed body
		out, err := form.Decode(schema, values)
		checkDecoded(t, out, err, true)
	})
}

// FuzzRender renders stored values, a server error and an id prefix with the lists
// schema. The secret apiKey is never written, whatever the value.
func FuzzRender(f *testing.F) {
	schema := fuzzSchema(f, filepath.Join("testdata", "lists.schema.json"))
	f.Add(`{"apiKey": "never-shown-0123456789", "ports": [8080, 8443], "relays": [{"url": "https://relay.example", "inbox": false, "tags": ["a"]}]}`,
		"/ports/1", "must be at most 65535", "dep-")
	f.Add(`{"ratio": 0.25, "level": 2, "trustedProxies": ["10.0.0.1", "10.0.0.2"], "ports": [8080]}`, "", "the whole form is wrong", "")
	f.Add(`{"trustedProxies": ["\"><script>alert(1)</script>"], "relays": [{"url": "javascript:alert(1)", "tags": ["</textarea><script>x</script>"]}]}`,
		"/relays/0/url\"><script>", "<img src=x onerror=alert(1)>", "\"><script>")
	f.Add(`{"level": "2", "ratio": "x", "ports": {"0": 1}, "relays": [null, 3, "s"], "trustedProxies": [[], {}]}`, "/level", "", "")
	f.Add(`[1, 2, 3]`, "/", "x", "")
	f.Add(`null`, "", "", "")
	f.Add(`{"ports": [1e400, -0, 1.5e-300, 12345678901234567890123]}`, "/ports/0", "too big", "p")
	f.Fuzz(func(t *testing.T, value, errPtr, errMsg, idPrefix string) {
		opts := form.Options{
			Errors:     map[string]string{errPtr: errMsg},
			SecretsSet: map[string]bool{"/apiKey": true},
			IDPrefix:   idPrefix,
		}
		out, err := form.Render(schema, json.RawMessage(value), opts)
		if err != nil {
			if json.Valid([]byte(value)) {
				t.Fatalf("Render refused a JSON value: %v", err)
			}
			return
		}
		checkHTML(t, string(out))
		var v struct {
			APIKey string `json:"apiKey"`
		}
		if json.Unmarshal([]byte(value), &v) == nil && len(v.APIKey) >= 8 && strings.Contains(string(out), html.EscapeString(v.APIKey)) &&
			!strings.Contains(string(schema)+errPtr+errMsg+idPrefix, v.APIKey) {
			t.Fatalf("the form shows the secret apiKey %q:\n%s", v.APIKey, out)
		}
	})
}

// FuzzSchema renders and decodes with any schema, as an app plugin may ship one: either
// an error, or a form without markup of the schema's making and a JSON document.
func FuzzSchema(f *testing.F) {
	for _, s := range append(appSchemas(f), fuzzSchema(f, filepath.Join("testdata", "lists.schema.json"))) {
		f.Add(string(s), "{}", "")
	}
	f.Add(`{"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/a"}}}`, "{}", "%2Fa=1")
	f.Add(`{"type": "object", "properties": {"<script>x</script>": {"type": "string", "title": "<script>t</script>", "description": "\"onload=\"x",
		"enum": ["<script>", "\" onclick=\"y"], "x-enumTitles": ["<b>", "</option><script>"], "default": "<script>"}}}`,
		`{"<script>x</script>": "\"><script>"}`, "%2F%3Cscript%3Ex%3C~1script%3E=%3Cscript%3E")
	f.Add(`{"type": "object", "properties": {"n": {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 1}}}`, `{"n": [1, 2]}`, "%2Fn%2F0=1")
	f.Add(`{"type": "object", "properties": {"x": {"type": ["string", "null"], "pattern": "[", "x-widget": "textarea", "x-order": -1e308}}}`, `{"x": null}`, "%2Fx=a%0D%0Ab")
	f.Add(`{"type": "array"}`, "[]", "")
	f.Add(`true`, "", "")
	f.Fuzz(func(t *testing.T, schema, value, body string) {
		out, err := form.Render(json.RawMessage(schema), json.RawMessage(value), form.Options{IDPrefix: "f-"})
		if err == nil {
			checkHTML(t, string(out))
		}
		values, _ := url.ParseQuery(body)
		decoded, err := form.Decode(json.RawMessage(schema), values)
		checkDecoded(t, decoded, err, false)
	})
}
