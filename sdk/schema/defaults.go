package schema

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ApplyDefaults fills in doc, a document decoded by jsonschema.UnmarshalJSON or by
// encoding/json with UseNumber, the default of every property s declares that doc lacks,
// at every depth: inside objects, array items and the targets of $ref and allOf. A
// default that is an object gets the defaults of its own properties too. Conditional
// keywords (if/then, anyOf, oneOf) are not followed, since which branch applies depends on
// the very values being filled in. It returns doc, changed in place where it is an object
// or an array.
func ApplyDefaults(s *jsonschema.Schema, doc any) any {
	applyDefaults(s, doc, 0)
	return doc
}

func applyDefaults(s *jsonschema.Schema, doc any, depth int) {
	if s == nil || depth > 64 {
		return
	}
	applyDefaults(s.Ref, doc, depth+1)
	for _, sub := range s.AllOf {
		applyDefaults(sub, doc, depth+1)
	}
	switch v := doc.(type) {
	case map[string]any:
		for name, ps := range s.Properties {
			if _, ok := v[name]; !ok {
				if d := defaultOf(ps); d != nil {
					v[name] = clone(*d)
				}
			}
			if pv, ok := v[name]; ok {
				applyDefaults(ps, pv, depth+1)
			}
		}
	case []any:
		for i, item := range v {
			if i < len(s.PrefixItems) {
				applyDefaults(s.PrefixItems[i], item, depth+1)
			} else if s.Items2020 != nil {
				applyDefaults(s.Items2020, item, depth+1)
			}
		}
	}
}

// defaultOf is the default of s, or of what its $ref names when s has none of its own.
func defaultOf(s *jsonschema.Schema) *any {
	for depth := 0; s != nil && depth < 32; depth++ {
		if s.Default != nil {
			return s.Default
		}
		s = s.Ref
	}
	return nil
}

// clone copies a decoded JSON value, so that filling in one document never changes the
// schema's default or another document.
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	}
	return v
}
