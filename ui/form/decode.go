package form

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Error is a submission with fields that do not parse. Fields maps their JSON pointers to
// what is wrong, in the shape of Options.Errors, so the form can be shown again with them.
type Error struct {
	Fields map[string]string
}

func (e *Error) Error() string {
	ptrs := make([]string, 0, len(e.Fields))
	for ptr := range e.Fields {
		ptrs = append(ptrs, ptr)
	}
	sort.Strings(ptrs)
	parts := make([]string, len(ptrs))
	for i, ptr := range ptrs {
		parts[i] = ptr + ": " + e.Fields[ptr]
	}
	return "form: " + strings.Join(parts, "; ")
}

// Decode rebuilds the JSON document of schema from a submission of the fields Render
// wrote: numbers parsed, booleans from their switch and hidden input, list rows in index
// order. What the operator left as it was is left out, so that the host fills in the
// default and an optional object nobody touched is not sent: an empty field (a writeOnly
// value left empty keeps the stored secret), a value equal to its default, a switch left
// off that has no default and is not required, an empty list that has none, and an object
// with nothing left in it. Names that are not fields of the schema (a CSRF token) are
// ignored. A value that does not parse is an *Error naming its pointer; the document is
// then still returned, with every value that did parse, so that a page can show the
// submission again without losing what was typed.
func Decode(schemaJSON json.RawMessage, form url.Values) (json.RawMessage, error) {
	root, err := compile(schemaJSON)
	if err != nil {
		return nil, err
	}
	d := &decoder{form: form, errs: map[string]string{}}
	v, ok := d.value(root, "", true)
	if !ok {
		v = map[string]any{}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(d.errs) > 0 {
		return out, &Error{Fields: d.errs}
	}
	return out, nil
}

type decoder struct {
	form url.Values
	errs map[string]string
}

// value decodes the value at ptr; ok is false when the form has nothing for it, or only
// what stands for leaving it as it is.
func (d *decoder) value(s *schema, ptr string, required bool) (any, bool) {
	v, ok := d.decode(s, ptr)
	if !ok || ptr == "" {
		return v, ok || ptr == ""
	}
	if s.HasDefault && sameJSON(v, s.Default) {
		return nil, false
	}
	if !s.HasDefault && !required {
		switch x := v.(type) {
		case bool:
			return v, x
		case []any:
			return v, len(x) > 0
		}
	}
	return v, true
}

func (d *decoder) decode(s *schema, ptr string) (any, bool) {
	switch {
	case s.Type == "object":
		obj := map[string]any{}
		for _, pr := range s.Properties {
			if v, ok := d.value(pr.Schema, ptr+"/"+escapeToken(pr.Name), s.Required[pr.Name]); ok {
				obj[pr.Name] = v
			}
		}
		return obj, len(obj) > 0
	case s.Type == "array":
		return d.array(s, ptr)
	}
	text, ok := d.first(ptr)
	if !ok {
		return nil, false
	}
	if s.Type == "boolean" && len(s.Enum) == 0 {
		return d.boolean(ptr)
	}
	text = strings.ReplaceAll(text, "\r\n", "\n") // browsers submit a textarea's newlines as CRLF
	if text == "" {
		return nil, false
	}
	if len(s.Enum) > 0 {
		for _, e := range s.Enum {
			if scalarText(e) == text {
				return e, true
			}
		}
		d.errs[ptr] = "not one of the choices; pick one from the list"
		return nil, false
	}
	// The messages never quote what was typed: it may be a secret, and the page shows the
	// field with it anyway.
	switch s.Type {
	case "integer":
		return d.integer(ptr, text)
	case "number":
		return d.number(ptr, text)
	}
	return text, true
}

func (d *decoder) first(ptr string) (string, bool) {
	vs := d.form[ptr]
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// boolean reads a switch: its hidden input submits false, the checked box true.
func (d *decoder) boolean(ptr string) (any, bool) {
	v := false
	for _, s := range d.form[ptr] {
		switch s {
		case "true":
			v = true
		case "false":
		default:
			d.errs[ptr] = "not a yes/no value; use the switch"
			return nil, false
		}
	}
	return v, true
}

func (d *decoder) integer(ptr, text string) (any, bool) {
	text = strings.TrimSpace(text)
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return json.Number(strconv.FormatInt(n, 10)), true
	}
	// A browser accepts 1e2 in a number field with step 1.
	if f, err := strconv.ParseFloat(text, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return json.Number(strconv.FormatInt(int64(f), 10)), true
	}
	d.errs[ptr] = "This is not a whole number; write digits only, such as 60"
	return nil, false
}

func (d *decoder) number(ptr, text string) (any, bool) {
	text = strings.TrimSpace(text)
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		d.errs[ptr] = "This is not a number; write it such as 2.5"
		return nil, false
	}
	if json.Valid([]byte(text)) {
		return json.Number(text), true
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
}

// array reads the rows ptr/0, ptr/1, ... in index order (rows removed in the browser
// leave gaps), or the chosen values of a set of checkboxes, submitted under ptr itself.
// Rows of scalars left empty are dropped.
func (d *decoder) array(s *schema, ptr string) (any, bool) {
	_, marked := d.form[ptr]
	items := []any{}
	if s.Items == nil {
		return items, marked
	}
	if len(s.Items.Enum) > 0 && (s.UniqueItems || s.Widget == "checkboxes") {
		for _, text := range d.form[ptr] {
			if text == "" {
				continue
			}
			v, ok := d.choiceItem(s.Items, ptr, text)
			if ok {
				items = append(items, v)
			}
		}
		return items, marked
	}
	for _, i := range d.indexes(ptr) {
		if v, ok := d.value(s.Items, ptr+"/"+strconv.Itoa(i), true); ok {
			items = append(items, v)
		}
	}
	return items, marked || len(items) > 0
}

func (d *decoder) choiceItem(s *schema, ptr, text string) (any, bool) {
	for _, e := range s.Enum {
		if scalarText(e) == text {
			return e, true
		}
	}
	d.errs[ptr] = "A value is not one of the choices; pick from the list"
	return nil, false
}

// indexes lists the row indexes submitted under the array at ptr, in order.
func (d *decoder) indexes(ptr string) []int {
	seen := map[int]bool{}
	prefix := ptr + "/"
	for name := range d.form {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		tok, _, _ := strings.Cut(rest, "/")
		if tok == "" || strings.Trim(tok, "0123456789") != "" || (len(tok) > 1 && tok[0] == '0') {
			continue
		}
		if i, err := strconv.Atoi(tok); err == nil {
			seen[i] = true
		}
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// sameJSON tells whether two decoded values are the same JSON.
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
