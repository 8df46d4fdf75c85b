package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// resultShape is what the provider reads of a type's result schema: its fields, which
// are required, and which are secret references.
type resultShape struct {
	fields   []string
	required []string
	secret   map[string]bool
}

func shapeOf(typ string) (resultShape, error) {
	raw, err := contract.ResultSchema(typ)
	if err != nil {
		return resultShape{}, err
	}
	var s struct {
		Properties map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return resultShape{}, fmt.Errorf("reading the %s result schema: %w", typ, err)
	}
	shape := resultShape{required: s.Required, secret: map[string]bool{}}
	for name, p := range s.Properties {
		shape.fields = append(shape.fields, name)
		if _, ok := p.Properties["secret"]; ok && len(p.Properties) == 1 {
			shape.secret[name] = true
		}
	}
	slices.Sort(shape.fields)
	return shape, nil
}

// secretName is the name of an output's value among the secrets: a DNS label.
func secretName(output string) string { return strings.ReplaceAll(output, "_", "-") }

// result reads the module's outputs into the type's result: an output per field of the
// result, by the field's name; a field that is a secret reference takes a sensitive
// output, whose value goes into the secrets. Other outputs are not read.
func (r *run) result(ctx context.Context) (resource.Result, error) {
	outputs, err := r.tf.Output(ctx)
	if err != nil {
		return resource.Result{}, r.failed("output", err)
	}
	shape, err := shapeOf(r.typ)
	if err != nil {
		return resource.Result{}, err
	}
	data := map[string]any{}
	secrets := map[string][]byte{}
	for _, field := range shape.fields {
		out, ok := outputs[field]
		if !ok || string(out.Value) == "null" {
			if slices.Contains(shape.required, field) {
				return resource.Result{}, sdk.Invalid(r.moduleField, "the module %s has no output %q, which a %s result needs: declare output %q", r.mod.Dir, field, r.typ, field)
			}
			continue
		}
		if len(out.Value) > maxOutput {
			return resource.Result{}, sdk.Invalid(r.moduleField, "the output %q of module %s is larger than %d KiB", field, r.mod.Dir, maxOutput>>10)
		}
		if shape.secret[field] {
			if !out.Sensitive {
				return resource.Result{}, sdk.Invalid(r.moduleField, "the output %q of module %s is a secret: declare it sensitive = true", field, r.mod.Dir)
			}
			var text string
			value := []byte(out.Value)
			if json.Unmarshal(out.Value, &text) == nil {
				value = []byte(text)
			}
			name := secretName(field)
			secrets[name] = value
			data[field] = contract.SecretRef{Secret: name}
			continue
		}
		if out.Sensitive {
			return resource.Result{}, sdk.Invalid(r.moduleField, "the output %q of module %s is sensitive, but a %s result keeps it in the open: declare it without sensitive", field, r.mod.Dir, r.typ)
		}
		data[field] = out.Value
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return resource.Result{}, err
	}
	if err := contract.ValidateResult(r.typ, raw); err != nil {
		return resource.Result{}, sdk.Invalid(r.moduleField, "the outputs of module %s are not a %s result: %s", r.mod.Dir, r.typ, sdk.FieldOf(err)+": "+errMessage(err))
	}
	return resource.Result{Data: raw, Secrets: secrets}, nil
}

func errMessage(err error) string {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
