package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// operatorInstance is the secret instance that keeps what the operator typed.
const operatorInstance = "operator"

// secretPlaceholder is how a node file names a secret: ${secret:REF}.
var secretPlaceholder = regexp.MustCompile(`\$\{secret:([^}]+)\}`)

// takeOperatorSecrets moves the values of writeOnly options out of the configuration into
// the secret resource. refs maps each option's pointer (/apps/<app>/options/...) to its
// reference; an option left empty in a later submit keeps its stored value. With forget,
// refs lacks secrets stored before, and the secret resource is told to drop them even
// when nothing new was typed. The references of an import (importInstances) pass through
// as they are: they are kept in instances of their own.
func (e *Engine) takeOperatorSecrets(ctx context.Context, d store.Deployment, raw json.RawMessage, refs map[string]string, forget bool) (json.RawMessage, map[string]string, error) {
	cfg, out, err := e.takeOwnSecrets(ctx, d, raw, withoutImport(refs), forget)
	for pointer := range importInstances {
		if ref, ok := refs[pointer]; ok && err == nil {
			out[pointer] = ref
		}
	}
	return cfg, out, err
}

// withoutImport is refs without an import's references.
func withoutImport(refs map[string]string) map[string]string {
	out := make(map[string]string, len(refs))
	for pointer, ref := range refs {
		if _, imp := importInstances[pointer]; !imp {
			out[pointer] = ref
		}
	}
	return out
}

func (e *Engine) takeOwnSecrets(ctx context.Context, d store.Deployment, raw json.RawMessage, refs map[string]string, forget bool) (json.RawMessage, map[string]string, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, err
	}
	values := map[string]string{} // pointer -> value typed now
	apps, _ := doc["apps"].(map[string]any)
	for name, v := range apps {
		a, ok := e.opts.Catalog.App(name)
		if !ok {
			continue
		}
		appCfg, _ := v.(map[string]any)
		opts, _ := appCfg["options"].(map[string]any)
		if opts == nil {
			continue
		}
		var sch map[string]any
		if err := json.Unmarshal(a.Schema, &sch); err != nil {
			return nil, nil, err
		}
		collectWriteOnly(sch, opts, "/apps/"+name+"/options", values)
	}
	if len(values) == 0 && !forget {
		return raw, refs, nil
	}
	files := map[string]contract.SecretFile{}
	supplied := map[string][]byte{}
	fileOf := map[string]string{}
	for pointer, v := range values {
		f := secretFileName(pointer)
		files[f] = contract.SecretFile{Supplied: true}
		supplied[f] = []byte(v)
		fileOf[pointer] = f
	}
	// Keep the files of earlier secrets in the request, or the provider would forget them.
	for pointer := range refs {
		if _, now := values[pointer]; !now {
			f := secretFileName(pointer)
			files[f] = contract.SecretFile{Supplied: true}
			val, err := e.reveal(ctx, d.Namespace, operatorInstance, refs[pointer])
			if err != nil {
				return nil, nil, err
			}
			supplied[f] = val
		}
	}
	if len(files) == 0 {
		// Every stored secret was cleared: the secret resource keeps none.
		c, _, err := e.route(contract.Secret)
		if err != nil {
			return nil, nil, err
		}
		if err := c.Deprovision(ctx, resource.DeprovisionRequest{Tenant: d.Namespace, Instance: operatorInstance, Type: contract.Secret}); err != nil {
			return nil, nil, fmt.Errorf("clearing the operator's secrets: %w", err)
		}
		return raw, map[string]string{}, nil
	}
	res, err := e.keep(ctx, d.Namespace, operatorInstance, files, supplied)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]string{}
	for pointer := range refs {
		out[pointer] = res[secretFileName(pointer)]
	}
	for pointer, f := range fileOf {
		out[pointer] = res[f]
		catalog.DeletePointer(doc, pointer)
	}
	stored, err := json.Marshal(doc)
	return stored, out, err
}

// collectWriteOnly finds the string values of writeOnly properties.
func collectWriteOnly(sch map[string]any, cfg map[string]any, at string, out map[string]string) {
	props, _ := sch["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		v, ok := cfg[name]
		if !ok || ps == nil {
			continue
		}
		if wo, _ := ps["writeOnly"].(bool); wo {
			if s, ok := v.(string); ok && s != "" {
				out[at+"/"+name] = s
			}
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			collectWriteOnly(ps, sub, at+"/"+name, out)
		}
	}
}

// secretFileName turns an option's pointer into a DNS-safe secret file name.
func secretFileName(pointer string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimPrefix(pointer, "/apps/")) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	name = strings.ReplaceAll(name, "-options-", "-")
	if len(name) > 61 {
		name = strings.TrimLeft(name[len(name)-61:], "-")
	}
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "o-" + name
	}
	return strings.TrimRight(name, "-")
}

// keep stores values as supplied secret files of instance and returns file -> reference.
func (e *Engine) keep(ctx context.Context, tenant, instance string, files map[string]contract.SecretFile, values map[string][]byte) (map[string]string, error) {
	c, _, err := e.route(contract.Secret)
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(contract.SecretRequest{Files: files})
	if err != nil {
		return nil, err
	}
	res, err := c.Provision(ctx, resource.Request{Tenant: tenant, Instance: instance, Type: contract.Secret, Spec: spec, Secrets: values})
	if err != nil {
		return nil, fmt.Errorf("keeping secrets of %s in the secret resource: %w", instance, err)
	}
	var r contract.SecretResult
	if err := json.Unmarshal(res.Data, &r); err != nil {
		return nil, fmt.Errorf("the secret provider's result: %w", err)
	}
	out := map[string]string{}
	for f, fr := range r.Files {
		out[f] = fr.Ref
	}
	return out, nil
}

// reveal reads a secret's value for instance.
func (e *Engine) reveal(ctx context.Context, tenant, instance, ref string) ([]byte, error) {
	c, _, err := e.route(contract.Secret)
	if err != nil {
		return nil, err
	}
	v, err := c.Reveal(ctx, tenant, instance, ref)
	if err != nil {
		return nil, fmt.Errorf("reading secret %s of %s: %w", ref, instance, err)
	}
	return v, nil
}

// rewriteRefs replaces, in a result, each {"secret": KEY} by {"secret": refs[KEY]}.
func rewriteRefs(raw json.RawMessage, refs map[string]string) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			if k, ok := x["secret"].(string); ok && len(x) == 1 {
				if ref, ok := refs[k]; ok {
					return map[string]any{"secret": ref}
				}
			}
			for key, e := range x {
				x[key] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return json.Marshal(walk(v))
}

// secretOwners maps every secret reference of a deployment's resources to the secret
// instance that can reveal it.
func secretOwners(rows []store.Resource) map[string]string {
	owners := map[string]string{}
	for _, r := range rows {
		if r.Type == contract.Secret {
			var res contract.SecretResult
			if json.Unmarshal([]byte(r.Result), &res) == nil {
				for _, f := range res.Files {
					owners[f.Ref] = r.Name
				}
			}
			continue
		}
		refs := map[string]string{}
		_ = json.Unmarshal([]byte(r.SecretRefs), &refs)
		for _, ref := range refs {
			owners[ref] = r.SecretInstance
		}
	}
	return owners
}

// placeholders lists the secret references a node's files name, sorted.
func placeholders(spec contract.InstanceRequest) []string {
	seen := map[string]bool{}
	for _, f := range spec.Files {
		for _, m := range secretPlaceholder.FindAllStringSubmatch(f.Content, -1) {
			seen[m[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
