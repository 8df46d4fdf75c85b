// Package schema compiles JSON Schemas and turns validation failures into sdk errors that
// name the field and never the value. Only host-side packages (client, contract) import
// it: the JSON Schema library costs plugins 10-20 ms of start-up (see docs/benchmarks.md).
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/fedhost/fedhost/sdk"
)

var english = message.NewPrinter(language.English)

// Compile compiles one schema document, named url for its errors.
func Compile(url string, raw []byte) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
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
		field += "/" + tok
	}
	return sdk.Invalid(field, "%s", leaf.ErrorKind.LocalizedString(english))
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
