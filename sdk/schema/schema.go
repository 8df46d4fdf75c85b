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

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fedhost/fedhost/sdk"
)

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
// invalid_request whose Field is prefix followed by the JSON pointer of the first problem
// (see Check for all of them) and whose Message says what is wrong in the schema's words.
func Validate(s *jsonschema.Schema, prefix string, raw json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return sdk.Invalid(prefix, "not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return invalid(prefix, Problems(s, err))
	}
	return nil
}

// Error turns a validation error into an *sdk.Error naming the first problem's place;
// without the schema, values are named by their property names.
func Error(prefix string, err error) *sdk.Error {
	return invalid(prefix, Problems(nil, err))
}

func invalid(prefix string, problems []Problem) *sdk.Error {
	if len(problems) == 0 {
		return sdk.Invalid(prefix, "is not valid")
	}
	return sdk.Invalid(prefix+problems[0].Location, "%s", problems[0].Message)
}
