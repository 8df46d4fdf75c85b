package form

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strconv"
	"strings"
)

// Options are what Render needs beside the schema and the value.
type Options struct {
	// Errors maps the JSON pointer of a value (/apps/miniflux/options/pollingFrequency)
	// to the message shown next to its field. A message whose pointer has no field is
	// shown in a list above the form.
	Errors map[string]string
	// SecretsSet holds the JSON pointers of the writeOnly values the stored configuration
	// has; their fields show "set" and may be left empty to keep them.
	SecretsSet map[string]bool
	// IDPrefix starts every id, for pages with more than one form.
	IDPrefix string
}

// Render writes the fields of the form of schema (whose root is an object) filled with
// value (the stored configuration, or nil). Values of writeOnly properties are never
// written.
func Render(schemaJSON json.RawMessage, value json.RawMessage, opts Options) (template.HTML, error) {
	root, err := compile(schemaJSON)
	if err != nil {
		return "", err
	}
	var val any
	has := len(bytes.TrimSpace(value)) > 0
	if has {
		if val, err = decodeJSON(value); err != nil {
			return "", fmt.Errorf("form: the value is not JSON: %w", err)
		}
		has = val != nil
	}
	r := &renderer{opts: opts, shown: map[string]bool{}}
	r.w.depth = 1
	r.field(root, place{}, val, has)

	var out writer
	var unplaced []string
	for ptr := range opts.Errors {
		if !r.shown[ptr] {
			unplaced = append(unplaced, ptr)
		}
	}
	if len(unplaced) > 0 {
		sort.Strings(unplaced)
		out.open("div", at("class", "form-errors"), at("role", "alert"))
		for _, ptr := range unplaced {
			where := ptr
			if where == "" {
				where = "the whole form"
			}
			out.elem("p", opts.Errors[ptr]+" ("+where+")", at("class", "field-error"))
		}
		out.close("div")
	}
	out.depth = 0
	out.open("div", at("class", "form-fields"))
	out.b.WriteString(r.w.b.String())
	out.close("div")
	return template.HTML(out.b.String()), nil
}

type renderer struct {
	opts  Options
	w     writer
	shown map[string]bool // errors placed next to a field
}

// place is where a value sits in the form.
type place struct {
	ptr      string // JSON pointer of the value, the name of its control
	label    string // what the field is called when its schema has no title
	required bool
	// conditional: inside a section the page may hide, so the browser must not refuse
	// to submit because of it; required is then only announced.
	conditional bool
	templates   int  // enclosing row templates; a template's index token depends on it
	row         bool // the value is a row of a list, which is dropped when left empty
}

func (p place) child(token, label string) place {
	return place{ptr: p.ptr + "/" + token, label: label, conditional: p.conditional, templates: p.templates}
}

// fieldMeta is what every field has: its id, help text and error.
type fieldMeta struct {
	id, helpID, errID, err string
	describedBy            string
}

func (r *renderer) id(ptr string) string { return r.opts.IDPrefix + "field" + encodeID(ptr) }

func (r *renderer) meta(s *schema, p place) fieldMeta {
	m := fieldMeta{id: r.id(p.ptr)}
	var ids []string
	if s.Description != "" {
		m.helpID = m.id + ".help"
		ids = append(ids, m.helpID)
	}
	if msg, ok := r.opts.Errors[p.ptr]; ok && p.templates == 0 {
		r.shown[p.ptr] = true
		m.err, m.errID = msg, m.id+".error"
		ids = append(ids, m.errID)
	}
	m.describedBy = strings.Join(ids, " ")
	return m
}

// controlAttrs are the attributes every control shares.
func (m fieldMeta) controlAttrs(p place, attrs ...attr) []attr {
	return append([]attr{
		at("id", m.id), at("name", p.ptr),
		atIf("aria-describedby", m.describedBy, m.describedBy != ""),
		atIf("aria-invalid", "true", m.err != ""),
		flag("required", p.required && !p.conditional),
		atIf("aria-required", "true", p.required && p.conditional),
	}, attrs...)
}

func (r *renderer) notes(s *schema, m fieldMeta) {
	if m.helpID != "" {
		r.w.elem("p", s.Description, at("class", "field-help"), at("id", m.helpID))
	}
	if m.errID != "" {
		r.w.elem("p", m.err, at("class", "field-error"), at("id", m.errID))
	}
}

func labelOf(s *schema, p place) string {
	switch {
	case s.Title != "":
		return s.Title
	case p.label != "":
		return p.label
	}
	return "Options"
}

func (r *renderer) field(s *schema, p place, val any, has bool) {
	switch {
	case s.Type == "object":
		r.object(s, p, val, has)
	case s.Type == "array" && s.Items != nil && len(s.Items.Enum) > 0 && (s.UniqueItems || s.Widget == "checkboxes"):
		r.checkboxes(s, p, val, has)
	case s.Type == "array":
		r.array(s, p, val, has)
	case s.WriteOnly || s.Widget == "password":
		r.secret(s, p)
	case len(s.Enum) > 0:
		r.choice(s, p, val, has)
	case s.Type == "boolean":
		r.toggle(s, p, val, has)
	case s.Type == "integer" || s.Type == "number":
		r.number(s, p, val, has)
	default:
		r.text(s, p, val, has)
	}
}

func (r *renderer) object(s *schema, p place, val any, has bool) {
	m := r.meta(s, p)
	r.w.open("fieldset", at("class", "field-object"), at("id", m.id),
		atIf("aria-describedby", m.describedBy, m.describedBy != ""))
	r.w.legend(labelOf(s, p), p.required)
	r.notes(s, m)
	obj, _ := val.(map[string]any)
	if !has && s.HasDefault {
		obj, _ = s.Default.(map[string]any)
	}
	// An optional object left untouched is not sent, so what it requires is required
	// only once one of its fields is filled in: the browser must not insist on it.
	optional := p.ptr != "" && !p.required && !s.HasDefault
	if optional && len(s.Required) > 0 && !p.row {
		r.w.elem("p", "The fields marked * are needed only when this part is filled in.", at("class", "field-help"))
	}
	child := func(pr property, cp place) {
		v, ok := obj[pr.Name]
		// A required value with a default may be left empty: the host fills the default in.
		cp.required = s.Required[pr.Name] && !pr.Schema.HasDefault
		cp.conditional = cp.conditional || optional
		r.field(pr.Schema, cp, v, ok)
	}
	enable, toggled := switchOf(s)
	if !toggled {
		for _, pr := range s.Properties {
			child(pr, p.child(escapeToken(pr.Name), pr.Name))
		}
		r.w.close("fieldset")
		return
	}
	// An object with an enable switch (an app of a deployment, an optional feature of an
	// app) shows its other properties only while it is on; deleteData of an app only
	// matters while the app is off, so it shows then.
	on := isTrue(obj[enableProperty], enable.Schema)
	child(enable, p.child(enableProperty, enableProperty))
	enablePtr := p.ptr + "/" + enableProperty
	var whenOff, whenOn []property
	for _, pr := range s.Properties {
		switch pr.Name {
		case enableProperty:
		case deleteDataProperty:
			whenOff = append(whenOff, pr)
		default:
			whenOn = append(whenOn, pr)
		}
	}
	section := func(props []property, show string, hidden bool) {
		if len(props) == 0 {
			return
		}
		// A section with an error stays in view, or the operator could not see what to fix.
		for _, pr := range props {
			hidden = hidden && !r.errorsUnder(p.ptr+"/"+escapeToken(pr.Name), p)
		}
		r.w.open("div", at("class", "field-section"), at(show, enablePtr), flag("hidden", hidden))
		for _, pr := range props {
			cp := p.child(escapeToken(pr.Name), pr.Name)
			cp.conditional = true
			child(pr, cp)
		}
		r.w.close("div")
	}
	section(whenOff, "data-show-unless", on)
	section(whenOn, "data-show-when", !on)
	r.w.close("fieldset")
}

// errorsUnder tells whether an error is for the value at ptr or inside it.
func (r *renderer) errorsUnder(ptr string, p place) bool {
	if p.templates > 0 {
		return false
	}
	for e := range r.opts.Errors {
		if e == ptr || strings.HasPrefix(e, ptr+"/") {
			return true
		}
	}
	return false
}

// switchOf returns the boolean enable property of an object, if it has one.
func switchOf(s *schema) (property, bool) {
	for _, pr := range s.Properties {
		if pr.Name == enableProperty && pr.Schema.Type == "boolean" && len(pr.Schema.Enum) == 0 {
			return pr, true
		}
	}
	return property{}, false
}

// isTrue tells whether a boolean control starts checked: its value, else its default.
func isTrue(v any, s *schema) bool {
	if b, ok := v.(bool); ok {
		return b
	}
	b, _ := s.Default.(bool)
	return b
}

func (r *renderer) toggle(s *schema, p place, val any, has bool) {
	m := r.meta(s, p)
	var v any
	if has {
		v = val
	}
	r.w.open("div", at("class", "field field-boolean"))
	// The hidden input submits false when the box is unchecked; when checked, both submit
	// and Decode takes true.
	r.w.void("input", at("type", "hidden"), at("name", p.ptr), at("value", "false"))
	p.required = false // a required boolean may be false
	r.w.void("input", m.controlAttrs(p, at("type", "checkbox"), at("role", "switch"), at("value", "true"),
		flag("checked", isTrue(v, s)))...)
	r.w.label(m.id, labelOf(s, p), false, false)
	r.notes(s, m)
	r.w.close("div")
}

func (r *renderer) choice(s *schema, p place, val any, has bool) {
	m := r.meta(s, p)
	selected, chosen := "", has
	if has {
		selected = scalarText(val)
	} else if s.HasDefault {
		selected, chosen = scalarText(s.Default), true
	}
	r.w.open("div", at("class", "field field-enum"))
	r.w.label(m.id, labelOf(s, p), p.required, false)
	r.w.open("select", m.controlAttrs(p)...)
	if !s.HasDefault {
		r.w.elem("option", "(not set)", at("value", ""), flag("selected", !chosen))
	}
	for i, e := range s.Enum {
		text := scalarText(e)
		title := text
		if i < len(s.EnumTitles) && s.EnumTitles[i] != "" {
			title = s.EnumTitles[i]
		}
		r.w.elem("option", title, at("value", text), flag("selected", chosen && text == selected))
	}
	r.w.close("select")
	r.notes(s, m)
	r.w.close("div")
}

func (r *renderer) number(s *schema, p place, val any, has bool) {
	m := r.meta(s, p)
	step := s.MultipleOf
	if step == "" {
		step = "any"
		if s.Type == "integer" {
			step = "1"
		}
	}
	value, placeholder := textValues(s, val, has)
	r.w.open("div", at("class", "field field-"+s.Type))
	r.w.label(m.id, labelOf(s, p), p.required, false)
	r.w.void("input", m.controlAttrs(p, at("type", "number"), at("value", value),
		atIf("min", s.Minimum, s.Minimum != ""), atIf("max", s.Maximum, s.Maximum != ""), at("step", step),
		atIf("placeholder", placeholder, placeholder != ""), at("inputmode", inputMode(s)))...)
	r.notes(s, m)
	r.w.close("div")
}

func inputMode(s *schema) string {
	if s.Type == "integer" && (s.Minimum == "" || !strings.HasPrefix(s.Minimum, "-")) {
		return "numeric"
	}
	return "decimal"
}

// textValues are the value of a text control and, when it has none, its default as placeholder.
func textValues(s *schema, val any, has bool) (value, placeholder string) {
	if has {
		return scalarText(val), ""
	}
	if s.HasDefault {
		return "", scalarText(s.Default)
	}
	return "", ""
}

func (r *renderer) text(s *schema, p place, val any, has bool) {
	m := r.meta(s, p)
	value, placeholder := textValues(s, val, has)
	limits := []attr{
		atIf("minlength", intText(s.MinLength), s.MinLength != nil),
		atIf("maxlength", intText(s.MaxLength), s.MaxLength != nil),
		atIf("placeholder", placeholder, placeholder != ""),
	}
	r.w.open("div", at("class", "field field-string"))
	r.w.label(m.id, labelOf(s, p), p.required, false)
	if s.Widget == "textarea" {
		r.w.textarea(value, m.controlAttrs(p, append(limits, at("rows", "4"))...)...)
	} else {
		typ := "text"
		switch {
		case s.Widget == "email" || s.Format == "email":
			typ = "email"
		case s.Widget == "url" || s.Format == "uri":
			typ = "url"
		}
		r.w.void("input", m.controlAttrs(p, append([]attr{at("type", typ), at("value", value)},
			append(limits, atIf("pattern", htmlPattern(s.Pattern), s.Pattern != ""))...)...)...)
	}
	r.notes(s, m)
	r.w.close("div")
}

// secret writes a writeOnly value: never its value, only whether one is stored.
func (r *renderer) secret(s *schema, p place) {
	m := r.meta(s, p)
	set := r.opts.SecretsSet[p.ptr] && p.templates == 0
	if set {
		p.required = false // empty keeps the stored one
	}
	r.w.open("div", at("class", "field field-secret"))
	r.w.label(m.id, labelOf(s, p), p.required, set)
	attrs := []attr{at("type", "password"), at("autocomplete", "new-password"),
		atIf("placeholder", "leave empty to keep", set)}
	if s.Type == "string" {
		attrs = append(attrs,
			atIf("minlength", intText(s.MinLength), s.MinLength != nil),
			atIf("maxlength", intText(s.MaxLength), s.MaxLength != nil),
			atIf("pattern", htmlPattern(s.Pattern), s.Pattern != ""))
	}
	r.w.void("input", m.controlAttrs(p, attrs...)...)
	r.notes(s, m)
	if set {
		clearID := m.id + ".clear"
		r.w.open("div", at("class", "field-choice field-clear"))
		r.w.void("input", at("type", "checkbox"), at("id", clearID), at("name", ClearSecretField), at("value", p.ptr))
		r.w.label(clearID, "Clear the stored value", false, false)
		r.w.close("div")
	}
	r.w.close("div")
}

// ClearSecretField is the name of the checkboxes that ask to forget a stored writeOnly
// value; each submits the value's pointer.
const ClearSecretField = "clear-secret"

// array writes a list with a row per item, each with a remove button, and a template
// row that the add button copies. The buttons only work with Script, which shows them.
func (r *renderer) array(s *schema, p place, val any, has bool) {
	m := r.meta(s, p)
	items := arrayItems(s, val, has)
	itemLabel := labelOf(s, p)
	if s.Items.Title != "" {
		itemLabel = s.Items.Title
	}
	r.w.open("fieldset", at("class", "field-array"), at("id", m.id), at("data-array", p.ptr),
		atIf("data-min-items", intText(s.MinItems), s.MinItems != nil),
		atIf("data-max-items", intText(s.MaxItems), s.MaxItems != nil),
		at("data-next-index", strconv.Itoa(len(items))),
		atIf("aria-describedby", m.describedBy, m.describedBy != ""))
	r.w.legend(labelOf(s, p), p.required)
	r.notes(s, m)
	// Present even with no rows, so that removing every row submits an empty list.
	r.w.void("input", at("type", "hidden"), at("name", p.ptr), at("value", ""))
	r.w.open("ol", at("class", "array-rows"))
	canRemove := s.MinItems == nil || len(items) > *s.MinItems
	for i, v := range items {
		rp := p.child(strconv.Itoa(i), itemLabel)
		rp.row = true
		r.row(s, rp, v, true, canRemove)
	}
	r.w.close("ol")
	token := indexToken(p.templates)
	r.w.open("template", at("data-array-template", ""), at("data-index-token", token))
	tp := p.child(token, itemLabel)
	tp.templates++
	tp.row = true
	r.row(s, tp, nil, false, true)
	r.w.close("template")
	canAdd := s.MaxItems == nil || len(items) < *s.MaxItems
	r.w.elem("button", "Add", at("type", "button"), at("class", "array-add"), at("data-array-add", ""),
		flag("disabled", !canAdd), flag("hidden", true))
	r.w.close("fieldset")
}

func (r *renderer) row(s *schema, p place, val any, has, canRemove bool) {
	r.w.open("li", at("class", "array-row"), at("data-array-row", ""))
	r.field(s.Items, p, val, has)
	r.w.elem("button", "Remove", at("type", "button"), at("class", "array-remove"), at("data-array-remove", ""),
		flag("disabled", !canRemove), flag("hidden", true))
	r.w.close("li")
}

// indexToken stands for the index of a row added in the browser; it differs per level of
// nested templates so that filling in an outer row leaves the inner template's token.
func indexToken(level int) string { return "__i" + strconv.Itoa(level) + "__" }

func arrayItems(s *schema, val any, has bool) []any {
	if has {
		items, _ := val.([]any)
		return items
	}
	items, _ := s.Default.([]any)
	return items
}

// checkboxes writes a set of choices (an array of unique enum values) as one checkbox per choice.
func (r *renderer) checkboxes(s *schema, p place, val any, has bool) {
	m := r.meta(s, p)
	chosen := map[string]bool{}
	for _, v := range arrayItems(s, val, has) {
		chosen[scalarText(v)] = true
	}
	r.w.open("fieldset", at("class", "field-array field-checkboxes"), at("id", m.id),
		atIf("aria-describedby", m.describedBy, m.describedBy != ""))
	r.w.legend(labelOf(s, p), p.required)
	r.notes(s, m)
	r.w.void("input", at("type", "hidden"), at("name", p.ptr), at("value", ""))
	for i, e := range s.Items.Enum {
		text := scalarText(e)
		title := text
		if i < len(s.Items.EnumTitles) && s.Items.EnumTitles[i] != "" {
			title = s.Items.EnumTitles[i]
		}
		id := m.id + ".option" + strconv.Itoa(i)
		r.w.open("div", at("class", "field field-choice"))
		r.w.void("input", at("type", "checkbox"), at("id", id), at("name", p.ptr), at("value", text),
			flag("checked", chosen[text]))
		r.w.label(id, title, false, false)
		r.w.close("div")
	}
	r.w.close("fieldset")
}

func intText(n *int) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(*n)
}

// encodeID turns a JSON pointer into an id fragment, one to one: letters, digits and _
// stay, / becomes -, any other byte becomes . and two upper-case hex digits. Suffixes
// such as ".help" (lower case after the dot) therefore never collide with a field's id.
func encodeID(ptr string) string {
	var b strings.Builder
	for i := 0; i < len(ptr); i++ {
		c := ptr[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
			b.WriteByte(c)
		case c == '/':
			b.WriteByte('-')
		default:
			fmt.Fprintf(&b, ".%02X", c)
		}
	}
	return b.String()
}

// htmlPattern adapts a JSON Schema pattern to the pattern attribute, which browsers
// compile with the v flag: there a - at the edge of a character class, and ( ) [ { } / |
// inside one, must be escaped, or the browser ignores the whole pattern.
func htmlPattern(p string) string {
	var b strings.Builder
	inClass, classStart := false, 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			b.WriteString(p[i : i+2])
			i++
		case !inClass && c == '[':
			inClass = true
			b.WriteByte(c)
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			classStart = b.Len()
		case inClass && c == ']':
			inClass = false
			b.WriteByte(c)
		case inClass && c == '-' && (b.Len() == classStart || (i+1 < len(p) && p[i+1] == ']')):
			b.WriteString(`\-`)
		case inClass && strings.IndexByte("()[{}/|", c) >= 0:
			b.WriteString(`\` + string(c))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
