// Package schema validates JSON documents against JSON Schemas (2020-12, formats
// asserted) and turns a failure into an *sdk.Error that names the field (a JSON pointer)
// and never echoes the value, since a value may be a secret someone typed.
//
// Hosts use it for settings, resource requests and configurations. A plugin that imports
// it pays the JSON Schema library's initialisation at every start (10-20 ms, see
// docs/benchmarks.md); the host validates before a plugin is called anyway.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/fedhost/fedhost/sdk"
)

var english = message.NewPrinter(language.English)

// NewCompiler returns a compiler that asserts formats (email, hostname, uri, ...): in
// 2020-12 they are only annotations unless asked for.
func NewCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	return c
}

// Compile compiles one schema document, named url for its errors.
func Compile(url string, raw []byte) (*jsonschema.Schema, error) {
	c := NewCompiler()
	if err := Add(c, url, raw); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid JSON Schema: %w", url, err)
	}
	return s, nil
}

// Add adds a schema document to a compiler.
func Add(c *jsonschema.Compiler, url string, raw []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s is not JSON: %w", url, err)
	}
	return c.AddResource(url, doc)
}

// Validate checks the JSON document raw against s; a failure is an *sdk.Error with code
// invalid_request whose Field is prefix followed by the JSON pointer of the wrong value.
func Validate(s *jsonschema.Schema, prefix string, raw json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return sdk.Invalid(prefix, "not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return Error(prefix, err)
	}
	return nil
}

// Error turns a validation error into an *sdk.Error naming the most precise place.
func Error(prefix string, err error) *sdk.Error {
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return sdk.Invalid(prefix, "%v", err)
	}
	leaf := deepest(verr)
	field := prefix
	for _, tok := range leaf.InstanceLocation {
		field += "/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
	}
	return sdk.Invalid(field, "%s", describe(leaf.ErrorKind))
}

// describe says what is wrong without the value: the library's own texts quote the value
// for patterns, formats and bounds, and a value may be a secret an operator typed.
func describe(k jsonschema.ErrorKind) string {
	rat := func(r *big.Rat) string { f, _ := r.Float64(); return strconv.FormatFloat(f, 'g', -1, 64) }
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("does not match the pattern %s", k.Want)
	case *kind.Format:
		return fmt.Sprintf("is not a valid %s", k.Want)
	case *kind.Minimum:
		return "must be at least " + rat(k.Want)
	case *kind.Maximum:
		return "must be at most " + rat(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be more than " + rat(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be less than " + rat(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + rat(k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("is not of media type %s", k.Want)
	case *kind.Type:
		return fmt.Sprintf("must be of type %s", strings.Join(k.Want, " or "))
	}
	return k.LocalizedString(english)
}

// deepest returns the error with the longest instance location, the most precise place
// to point at, descended to its first leaf for the message.
func deepest(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := e
	var walk func(*jsonschema.ValidationError)
	walk = func(n *jsonschema.ValidationError) {
		if len(n.InstanceLocation) > len(best.InstanceLocation) {
			best = n
		}
		for _, c := range n.Causes {
			walk(c)
		}
	}
	walk(e)
	loc := best.InstanceLocation
	for len(best.Causes) > 0 {
		best = best.Causes[0]
	}
	return &jsonschema.ValidationError{InstanceLocation: loc, ErrorKind: best.ErrorKind}
}
