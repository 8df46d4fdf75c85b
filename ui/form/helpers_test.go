package form_test

import (
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// appSchema reads the schema an app plugin ships.
func appSchema(t *testing.T, app string) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "plugins", "apps", app, "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// deploymentSchema composes apps the way host/catalog does (compose in catalog.go): a
// property per app with enable, deleteData and options referring to $defs.
func deploymentSchema(t *testing.T, apps ...string) json.RawMessage {
	t.Helper()
	props := map[string]any{}
	defs := map[string]any{}
	for i, name := range apps {
		var s map[string]any
		if err := json.Unmarshal(appSchema(t, name), &s); err != nil {
			t.Fatal(err)
		}
		delete(s, "$schema")
		defs[name] = s
		props[name] = map[string]any{
			"type": "object", "title": name + " summary", "additionalProperties": false, "x-order": i + 1,
			"properties": map[string]any{
				"enable": map[string]any{"type": "boolean", "title": "Enable " + name, "default": false, "x-order": 1},
				"deleteData": map[string]any{"type": "boolean", "title": "Delete its data when disabled", "default": false, "x-order": 2,
					"description": "With the app disabled, the next deploy deletes its database, buckets and secrets. Without this, a disabled app keeps its data."},
				"options": map[string]any{"$ref": "#/$defs/" + name, "x-order": 3},
			},
			"default": map[string]any{},
		}
	}
	doc := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Deployment", "type": "object",
		"additionalProperties": false, "required": []string{"domain"},
		"properties": map[string]any{
			"domain": map[string]any{"type": "string", "title": "Domain", "x-order": 1, "maxLength": 253,
				"pattern":     `^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`,
				"description": "The operator's domain, e.g. example.org; apps are served on it."},
			"apps": map[string]any{"type": "object", "title": "Applications", "x-order": 2, "additionalProperties": false,
				"properties": props, "default": map[string]any{}},
		},
		"$defs": defs,
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ui/form -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output; if the change is intended, run go test ./ui/form -update and review the diff\n--- got\n%s", path, got)
	}
}

// page is the parsed output of Render.
type page struct {
	root *html.Node
}

func parse(t *testing.T, out string) page {
	t.Helper()
	ctx := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := html.ParseFragment(strings.NewReader(out), ctx)
	if err != nil {
		t.Fatal(err)
	}
	root := &html.Node{Type: html.ElementNode, Data: "form"}
	for _, n := range nodes {
		root.AppendChild(n)
	}
	return page{root: root}
}

func attrOf(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasAttr(n *html.Node, key string) bool {
	_, ok := attrOf(n, key)
	return ok
}

// live visits the elements a browser would submit or show, skipping <template> rows.
func (p page) live(visit func(*html.Node)) {
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if n.Data == "template" {
				return
			}
			visit(n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(p.root)
}

func (p page) all(match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	p.live(func(n *html.Node) {
		if match(n) {
			out = append(out, n)
		}
	})
	return out
}

func (p page) byID(id string) *html.Node {
	found := p.all(func(n *html.Node) bool { v, _ := attrOf(n, "id"); return v == id })
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

// control is the visible control named name (not the hidden input of a switch).
func (p page) control(name string) *html.Node {
	found := p.all(func(n *html.Node) bool {
		v, ok := attrOf(n, "name")
		typ, _ := attrOf(n, "type")
		return ok && v == name && typ != "hidden"
	})
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

func (p page) labelFor(id string) *html.Node {
	found := p.all(func(n *html.Node) bool { v, _ := attrOf(n, "for"); return n.Data == "label" && v == id })
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// submit builds what a browser posts for the form: every named control outside the
// templates, hidden or not, checkboxes only when checked, a select's selected option
// (else its first), and a textarea's newlines as CRLF.
func (p page) submit() url.Values {
	form := url.Values{}
	p.live(func(n *html.Node) {
		name, ok := attrOf(n, "name")
		if !ok || name == "" || hasAttr(n, "disabled") {
			return
		}
		switch n.Data {
		case "input":
			typ, _ := attrOf(n, "type")
			v, _ := attrOf(n, "value")
			if (typ == "checkbox" || typ == "radio") && !hasAttr(n, "checked") {
				return
			}
			form.Add(name, v)
		case "textarea":
			form.Add(name, strings.ReplaceAll(text(n), "\n", "\r\n"))
		case "select":
			var first, chosen *html.Node
			var walk func(*html.Node)
			walk = func(c *html.Node) {
				if c.Type == html.ElementNode && c.Data == "option" {
					if first == nil {
						first = c
					}
					if hasAttr(c, "selected") {
						chosen = c
					}
				}
				for k := c.FirstChild; k != nil; k = k.NextSibling {
					walk(k)
				}
			}
			walk(n)
			if chosen == nil {
				chosen = first
			}
			v, _ := attrOf(chosen, "value")
			form.Add(name, v)
		}
	})
	return form
}

func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decoded output is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}
