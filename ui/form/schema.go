package form

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// The catalog gives each app of a deployment these two switches beside its options.
const (
	enableProperty     = "enable"
	deleteDataProperty = "deleteData"
)

// maxDepth bounds the nesting of a schema, so that a recursive $ref is an error and not
// an endless form.
const maxDepth = 32

// schema is one node of a JSON Schema with its $ref resolved, reduced to what a form needs.
type schema struct {
	Type        string // object, array, boolean, integer, number or string
	Title       string
	Description string
	Default     any // decoded with json.Number; meaningful only when HasDefault
	HasDefault  bool
	Enum        []any
	EnumTitles  []string
	Widget      string
	Format      string
	WriteOnly   bool
	Properties  []property // by x-order, then in the schema's own order
	Required    map[string]bool
	Items       *schema
	MinItems    *int
	MaxItems    *int
	Minimum     string
	Maximum     string
	MultipleOf  string
	MinLength   *int
	MaxLength   *int
	Pattern     string
	UniqueItems bool
	order       *float64
}

type property struct {
	Name   string
	Schema *schema
}

type rawSchema struct {
	Type        json.RawMessage   `json:"type"`
	Title       string            `json:"title"`
	Description string            `json:"description"`
	Default     json.RawMessage   `json:"default"`
	Enum        []json.RawMessage `json:"enum"`
	EnumTitles  []string          `json:"x-enumTitles"`
	Order       *float64          `json:"x-order"`
	Widget      string            `json:"x-widget"`
	Format      string            `json:"format"`
	WriteOnly   bool              `json:"writeOnly"`
	Properties  json.RawMessage   `json:"properties"`
	Required    []string          `json:"required"`
	Items       json.RawMessage   `json:"items"`
	MinItems    *int              `json:"minItems"`
	MaxItems    *int              `json:"maxItems"`
	Minimum     *json.Number      `json:"minimum"`
	Maximum     *json.Number      `json:"maximum"`
	MultipleOf  *json.Number      `json:"multipleOf"`
	MinLength   *int              `json:"minLength"`
	MaxLength   *int              `json:"maxLength"`
	Pattern     string            `json:"pattern"`
	UniqueItems bool              `json:"uniqueItems"`
}

// compile reads a schema document; its root must describe an object.
func compile(doc json.RawMessage) (*schema, error) {
	c := &compiler{}
	s, err := c.compile(doc, "#", 0, doc)
	if err != nil {
		return nil, fmt.Errorf("form: schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("form: schema: the root is of type %q; a form needs an object", s.Type)
	}
	return s, nil
}

type compiler struct{}

// compile reads the schema raw, whose local $refs resolve against base: the document, or
// the nearest enclosing schema with an $id (the composed schema gives each app's its own,
// so that an app's "#/$defs/..." means its own $defs).
func (c *compiler) compile(raw json.RawMessage, at string, depth int, base json.RawMessage) (*schema, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s nests deeper than %d levels (a recursive $ref?)", at, maxDepth)
	}
	node, base, err := c.resolve(raw, at, depth, base)
	if err != nil {
		return nil, err
	}
	merged, err := json.Marshal(node)
	if err != nil {
		return nil, err
	}
	var rs rawSchema
	if err := json.Unmarshal(merged, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	s := &schema{
		Title: rs.Title, Description: rs.Description, EnumTitles: rs.EnumTitles,
		Widget: rs.Widget, Format: rs.Format, WriteOnly: rs.WriteOnly,
		MinItems: rs.MinItems, MaxItems: rs.MaxItems, MinLength: rs.MinLength, MaxLength: rs.MaxLength,
		Pattern: rs.Pattern, UniqueItems: rs.UniqueItems, order: rs.Order,
		Minimum: numberText(rs.Minimum), Maximum: numberText(rs.Maximum), MultipleOf: numberText(rs.MultipleOf),
	}
	if len(rs.Default) > 0 {
		if s.Default, err = decodeJSON(rs.Default); err != nil {
			return nil, fmt.Errorf("%s/default: %w", at, err)
		}
		s.HasDefault = true
	}
	for i, e := range rs.Enum {
		v, err := decodeJSON(e)
		if err != nil {
			return nil, fmt.Errorf("%s/enum/%d: %w", at, i, err)
		}
		s.Enum = append(s.Enum, v)
	}
	props, err := members(rs.Properties)
	if err != nil {
		return nil, fmt.Errorf("%s/properties: %w", at, err)
	}
	if s.Type, err = schemaType(rs.Type, s.Enum, len(rs.Properties) > 0, len(rs.Items) > 0); err != nil {
		return nil, fmt.Errorf("%s/type: %w", at, err)
	}
	s.Required = map[string]bool{}
	for _, name := range rs.Required {
		s.Required[name] = true
	}
	for _, m := range props {
		ps, err := c.compile(m.value, at+"/properties/"+escapeToken(m.name), depth+1, base)
		if err != nil {
			return nil, err
		}
		s.Properties = append(s.Properties, property{Name: m.name, Schema: ps})
	}
	// x-order first; properties without one keep the order the schema lists them in.
	sort.SliceStable(s.Properties, func(i, j int) bool {
		return orderOf(s.Properties[i].Schema) < orderOf(s.Properties[j].Schema)
	})
	if len(rs.Items) > 0 {
		if s.Items, err = c.compile(rs.Items, at+"/items", depth+1, base); err != nil {
			return nil, err
		}
	}
	return s, nil
}

type member struct {
	name  string
	value json.RawMessage
}

// members reads a JSON object's members in the order they are written; a later member of
// the same name replaces an earlier one, as encoding/json does.
func members(raw json.RawMessage) ([]member, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object of schemas")
	}
	var out []member
	at := map[string]int{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		if i, ok := at[name]; ok {
			out[i].value = v
			continue
		}
		at[name] = len(out)
		out = append(out, member{name: name, value: v})
	}
	return out, nil
}

// resolve returns the keywords of raw, with those of its $ref target underneath them:
// in 2020-12 the keywords beside a $ref (x-order, title) apply as well. It also returns
// the base the keywords' own $refs resolve against.
func (c *compiler) resolve(raw json.RawMessage, at string, depth int, base json.RawMessage) (map[string]json.RawMessage, json.RawMessage, error) {
	if depth > maxDepth {
		return nil, nil, fmt.Errorf("%s: $ref chain longer than %d", at, maxDepth)
	}
	trimmed := bytes.TrimSpace(raw)
	if string(trimmed) == "true" {
		return map[string]json.RawMessage{}, base, nil
	}
	var node map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &node); err != nil {
		return nil, nil, fmt.Errorf("%s is not a schema object: %w", at, err)
	}
	if _, ok := node["$id"]; ok {
		base = trimmed
	}
	refRaw, ok := node["$ref"]
	if !ok {
		return node, base, nil
	}
	var ref string
	if err := json.Unmarshal(refRaw, &ref); err != nil {
		return nil, nil, fmt.Errorf("%s/$ref is not a string", at)
	}
	target, err := lookup(base, ref)
	if err != nil {
		return nil, nil, fmt.Errorf("%s/$ref: %w", at, err)
	}
	under, targetBase, err := c.resolve(target, ref, depth+1, base)
	if err != nil {
		return nil, nil, err
	}
	merged := make(map[string]json.RawMessage, len(under)+len(node))
	for k, v := range under {
		merged[k] = v
	}
	for k, v := range node {
		if k != "$ref" {
			merged[k] = v
		}
	}
	// What the target holds resolves against the target's base.
	return merged, targetBase, nil
}

// lookup finds a local reference ("#/$defs/miniflux") in the document base.
func lookup(base json.RawMessage, ref string) (json.RawMessage, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("%q is not a reference into this document; only #/... references are supported", ref)
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, fmt.Errorf("%q: %w", ref, err)
	}
	cur := base
	if frag == "" {
		return cur, nil
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, fmt.Errorf("%q: anchors are not supported, use a JSON pointer", ref)
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = unescapeToken(tok)
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) == nil {
			next, ok := obj[tok]
			if !ok {
				return nil, fmt.Errorf("%q: %q not found", ref, tok)
			}
			cur = next
			continue
		}
		var arr []json.RawMessage
		i, err := strconv.Atoi(tok)
		if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
			return nil, fmt.Errorf("%q: %q not found", ref, tok)
		}
		cur = arr[i]
	}
	return cur, nil
}

// schemaType picks the one type a form control stands for: the first non-null type, or
// what the enum, properties or items imply.
func schemaType(raw json.RawMessage, enum []any, hasProperties, hasItems bool) (string, error) {
	var types []string
	if len(raw) > 0 {
		var one string
		if err := json.Unmarshal(raw, &one); err == nil {
			types = []string{one}
		} else if err := json.Unmarshal(raw, &types); err != nil {
			return "", fmt.Errorf("not a type name or a list of them")
		}
	}
	for _, t := range types {
		switch t {
		case "null":
		case "object", "array", "boolean", "integer", "number", "string":
			return t, nil
		default:
			return "", fmt.Errorf("unknown type %q", t)
		}
	}
	switch {
	case len(enum) > 0:
		return enumType(enum), nil
	case hasProperties:
		return "object", nil
	case hasItems:
		return "array", nil
	}
	return "string", nil
}

func enumType(enum []any) string {
	kind := ""
	for _, e := range enum {
		k := "string"
		switch v := e.(type) {
		case bool:
			k = "boolean"
		case json.Number:
			k = "integer"
			if _, err := v.Int64(); err != nil {
				k = "number"
			}
		case nil:
			continue
		}
		switch {
		case kind == "":
			kind = k
		case kind == k:
		case (kind == "integer" || kind == "number") && (k == "integer" || k == "number"):
			kind = "number"
		default:
			return "string"
		}
	}
	if kind == "" {
		return "string"
	}
	return kind
}

func orderOf(s *schema) float64 {
	if s.order == nil {
		return math.Inf(1)
	}
	return *s.order
}

func numberText(n *json.Number) string {
	if n == nil {
		return ""
	}
	return n.String()
}

// decodeJSON decodes a JSON value keeping numbers as written.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// scalarText is how a value is written into a control: strings as they are, everything
// else as JSON.
func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// escapeToken escapes a property name as one JSON pointer token (RFC 6901).
func escapeToken(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

func unescapeToken(tok string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
}
