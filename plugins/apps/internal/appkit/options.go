package appkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/schema"
)

// HostKeys are the keys the host adds when it composes the deployment schema; an app's
// schema must not have them.
var HostKeys = []string{"domain", "enable", "deleteData"}

var hostnamePattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$`)

// Options is an app's option schema, compiled.
type Options struct {
	raw      json.RawMessage
	schema   *jsonschema.Schema
	defaults map[string]any
}

// MustOptions compiles an app's embedded option schema; an invalid one is a bug of the
// plugin, so it panics.
func MustOptions(raw []byte) *Options {
	o, err := NewOptions(raw)
	if err != nil {
		panic(err)
	}
	return o
}

// NewOptions compiles an option schema (JSON Schema 2020-12) whose top level is an object.
func NewOptions(raw []byte) (*Options, error) {
	s, err := schema.Compile("options.json", raw)
	if err != nil {
		return nil, fmt.Errorf("option schema: %w", err)
	}
	var top struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("option schema: %w", err)
	}
	defaults := map[string]any{}
	for name, p := range top.Properties {
		if len(p.Default) == 0 {
			continue
		}
		var v any
		if err := json.Unmarshal(p.Default, &v); err != nil {
			return nil, fmt.Errorf("option schema: default of %s: %w", name, err)
		}
		defaults[name] = v
	}
	return &Options{raw: raw, schema: s, defaults: defaults}, nil
}

// JSON returns the schema as given.
func (o *Options) JSON() json.RawMessage { return o.raw }

// Defaults returns a fresh document of every option's default.
func (o *Options) Defaults() map[string]any {
	out := make(map[string]any, len(o.defaults))
	for k, v := range o.defaults {
		out[k] = v
	}
	return out
}

// CheckDomain checks the deployment domain the host passed.
func CheckDomain(domain string) error {
	if !hostnamePattern.MatchString(domain) {
		return sdk.Invalid("domain", "the deployment domain %q is not a lower case host name such as example.org", domain)
	}
	return nil
}

// Decode checks config (the app's own options) against the schema and fills dst (a
// struct with json tags), defaults filled in for options left out. Errors are sdk.Invalid
// with the JSON pointer of the wrong value.
func (o *Options) Decode(config json.RawMessage, dst any) error {
	var doc map[string]any
	if len(bytes.TrimSpace(config)) == 0 {
		doc = map[string]any{}
	} else if err := json.Unmarshal(config, &doc); err != nil || doc == nil {
		return sdk.Invalid("", "the configuration is not a JSON object")
	}
	for k, v := range o.defaults {
		if _, set := doc[k]; !set {
			doc[k] = v
		}
	}
	if err := o.Validate(doc); err != nil {
		return err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding the options: %w", err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("decoding the options: %w", err)
	}
	return nil
}

// Validate checks an option document against the schema; the error names the JSON
// pointer of the wrong value and never the value.
func (o *Options) Validate(doc map[string]any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding the options: %w", err)
	}
	return schema.Validate(o.schema, "", b)
}
