package contract

import (
	"embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/schema"
)

// The resource types.
const (
	Secret     = "secret"
	PostgreSQL = "postgresql"
	S3         = "s3"
	Redis      = "redis"
	SMTP       = "smtp"
	DNS        = "dns"
	TLS        = "tls"
	LDAP       = "ldap"
	OIDC       = "oidc"
	Instance   = "instance"
	Route      = "route"
)

// Types lists every resource type, in the order a build provisions them.
var Types = []string{Secret, PostgreSQL, S3, Redis, LDAP, SMTP, DNS, TLS, OIDC, Instance, Route}

//go:embed schemas/*.json
var schemaFiles embed.FS

// SecretRef stands in a result for a secret value: Secret names the entry of the
// provider's resource.Result.Secrets that holds it.
type SecretRef struct {
	Secret string `json:"secret"`
}

// Known reports whether typ is a resource type.
func Known(typ string) bool {
	for _, t := range Types {
		if t == typ {
			return true
		}
	}
	return false
}

// RequestSchema returns the JSON Schema of typ's requests.
func RequestSchema(typ string) ([]byte, error) { return schemaFile(typ, "request") }

// ResultSchema returns the JSON Schema of typ's results.
func ResultSchema(typ string) ([]byte, error) { return schemaFile(typ, "result") }

func schemaFile(typ, part string) ([]byte, error) {
	if !Known(typ) {
		return nil, fmt.Errorf("unknown resource type %q", typ)
	}
	return schemaFiles.ReadFile("schemas/" + typ + "." + part + ".json")
}

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
)

func compile() {
	compiled = map[string]*jsonschema.Schema{}
	c := schema.NewCompiler()
	for _, typ := range Types {
		for _, part := range []string{"request", "result"} {
			raw, err := schemaFile(typ, part)
			if err != nil {
				compileErr = err
				return
			}
			if err := schema.Add(c, typ+"."+part+".json", raw); err != nil {
				compileErr = err
				return
			}
		}
	}
	for _, typ := range Types {
		for _, part := range []string{"request", "result"} {
			s, err := c.Compile(typ + "." + part + ".json")
			if err != nil {
				compileErr = err
				return
			}
			compiled[typ+"."+part] = s
		}
	}
}

// ValidateRequest checks spec against typ's request schema. The error is an *sdk.Error
// with code invalid_request whose Field is the JSON pointer of the first wrong value,
// prefixed with "spec"; it never contains the value.
func ValidateRequest(typ string, spec json.RawMessage) error { return validate(typ, "request", spec) }

// ValidateResult checks a result against typ's result schema, the same way.
func ValidateResult(typ string, result json.RawMessage) error { return validate(typ, "result", result) }

func validate(typ, part string, raw json.RawMessage) error {
	compileOnce.Do(compile)
	if compileErr != nil {
		return compileErr
	}
	s, ok := compiled[typ+"."+part]
	if !ok {
		return sdk.Invalid("type", "unknown resource type %q", typ)
	}
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	return schema.Validate(s, part, raw)
}
