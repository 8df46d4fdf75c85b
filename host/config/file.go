package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// resourceTypes are the resource types the sdk defines a contract for.
var resourceTypes = []string{"secret", "postgresql", "s3", "redis", "smtp", "dns", "tls", "ldap", "oidc", "instance", "route"}

var (
	fileSchema = &hcl.BodySchema{
		Attributes: settingAttributes(),
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "resource", LabelNames: []string{"type"}},
			{Type: "registrar", LabelNames: []string{"name"}},
			{Type: "app", LabelNames: []string{"name"}},
			{Type: "operator_oidc"},
			{Type: "backups", LabelNames: []string{"app"}},
		},
	}
	resourceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "provider", Required: true}, {Name: "settings"}, {Name: "limits"}},
	}
	backupsSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "schedule"}, {Name: "keep_within"}},
	}
	registrarSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "settings"}},
	}
	appSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "settings"}},
	}
	operatorOIDCSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "issuer", Required: true},
			{Name: "client_id", Required: true},
			{Name: "client_secret_file", Required: true},
			{Name: "redirect_url", Required: true},
			{Name: "username_claim"},
			{Name: "superuser_group"},
			{Name: "create_users"},
			{Name: "button_label"},
		},
	}
)

func settingAttributes() []hcl.AttributeSchema {
	attrs := make([]hcl.AttributeSchema, len(settings))
	for i, s := range settings {
		attrs[i] = hcl.AttributeSchema{Name: s.name}
	}
	return attrs
}

// applyFile decodes the HCL source src, read from filename, over c. The error lists
// every diagnostic, one a line, each naming its file position.
//
// The body is decoded against schemas rather than with gohcl: gohcl imports hclwrite,
// whose go-cmp dependency go.mod does not require. The diagnostics are the same.
func (c *Config) applyFile(src []byte, filename string) error {
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return diagError(diags)
	}
	content, d := f.Body.Content(fileSchema)
	diags = append(diags, d...)

	for _, s := range settings {
		attr := content.Attributes[s.name]
		if attr == nil {
			continue
		}
		diags = append(diags, decodeString(attr, s.field(c))...)
		c.sources[s.name] = attr.Range.String()
	}

	var resources []Resource
	var registrars []Registrar
	var apps []App
	var operatorOIDC *OperatorOIDC
	backups := map[string]AppBackups{}
	seen := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		key := strings.Join(append([]string{b.Type}, b.Labels...), " ")
		if first, ok := seen[key]; ok {
			detail := fmt.Sprintf("An %s block is already declared at %s; keep only one.", b.Type, first)
			if len(b.Labels) > 0 {
				detail = fmt.Sprintf("A %s %q block is already declared at %s; keep only one.", b.Type, b.Labels[0], first)
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate " + b.Type + " block",
				Detail:   detail,
				Subject:  b.DefRange.Ptr(),
			})
			continue
		}
		seen[key] = b.DefRange

		switch b.Type {
		case "resource":
			r, d := decodeResource(b)
			diags = append(diags, d...)
			resources = append(resources, r)
		case "registrar":
			r, d := decodeRegistrar(b)
			diags = append(diags, d...)
			registrars = append(registrars, r)
		case "app":
			content, d := b.Body.Content(appSchema)
			diags = append(diags, d...)
			a := App{Name: b.Labels[0]}
			a.Settings, d = objectJSON(content.Attributes["settings"], false)
			diags = append(diags, d...)
			apps = append(apps, a)
		case "operator_oidc":
			o, d := c.decodeOperatorOIDC(b)
			diags = append(diags, d...)
			operatorOIDC = o
		case "backups":
			content, d := b.Body.Content(backupsSchema)
			diags = append(diags, d...)
			var ab AppBackups
			prefix := "backups." + b.Labels[0] + "."
			for name, dst := range map[string]*string{"schedule": &ab.Schedule, "keep_within": &ab.KeepWithin} {
				if attr := content.Attributes[name]; attr != nil {
					diags = append(diags, decodeString(attr, dst)...)
					c.sources[prefix+name] = attr.Range.String()
				}
			}
			backups[b.Labels[0]] = ab
		}
	}

	if diags.HasErrors() {
		return diagError(diags)
	}
	if len(resources) > 0 {
		c.Resources = resources
		// .localhost names are for the embedded default's one machine.
		if content.Attributes["suggested_domain"] == nil {
			c.SuggestedDomain = ""
		}
	}
	c.Registrars = registrars
	c.Apps = apps
	c.OperatorOIDC = operatorOIDC
	c.Backups = backups
	return nil
}

func decodeResource(b *hcl.Block) (Resource, hcl.Diagnostics) {
	r := Resource{Type: b.Labels[0]}
	var diags hcl.Diagnostics
	if !slices.Contains(resourceTypes, r.Type) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unknown resource type",
			Detail:   fmt.Sprintf("%q is not a resource type; use one of %s.", r.Type, strings.Join(resourceTypes, ", ")),
			Subject:  b.LabelRanges[0].Ptr(),
		})
	}
	content, d := b.Body.Content(resourceSchema)
	diags = append(diags, d...)
	if attr := content.Attributes["provider"]; attr != nil {
		d := decodeString(attr, &r.Provider)
		if !d.HasErrors() && r.Provider == "" {
			d = append(d, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Empty provider",
				Detail:   "provider must name the provider plugin that answers this resource type, such as \"embedded\".",
				Subject:  attr.Expr.Range().Ptr(),
			})
		}
		diags = append(diags, d...)
	}
	r.Settings, d = objectJSON(content.Attributes["settings"], false)
	diags = append(diags, d...)
	r.Limits, d = objectJSON(content.Attributes["limits"], true)
	diags = append(diags, d...)
	return r, diags
}

func decodeRegistrar(b *hcl.Block) (Registrar, hcl.Diagnostics) {
	r := Registrar{Name: b.Labels[0]}
	content, diags := b.Body.Content(registrarSchema)
	var d hcl.Diagnostics
	r.Settings, d = objectJSON(content.Attributes["settings"], false)
	return r, append(diags, d...)
}

// decodeOperatorOIDC decodes an operator_oidc block and notes where each attribute is,
// under "operator_oidc.<name>", for the errors of validate.
func (c *Config) decodeOperatorOIDC(b *hcl.Block) (*OperatorOIDC, hcl.Diagnostics) {
	o := &OperatorOIDC{UsernameClaim: DefaultUsernameClaim, ButtonLabel: DefaultButtonLabel}
	content, diags := b.Body.Content(operatorOIDCSchema)
	c.sources["operator_oidc"] = b.DefRange.String()
	fields := map[string]*string{
		"issuer": &o.Issuer, "client_id": &o.ClientID, "client_secret_file": &o.ClientSecretFile,
		"redirect_url": &o.RedirectURL, "username_claim": &o.UsernameClaim,
		"superuser_group": &o.SuperuserGroup, "button_label": &o.ButtonLabel,
	}
	for name, attr := range content.Attributes {
		c.sources["operator_oidc."+name] = attr.Range.String()
		if dst, ok := fields[name]; ok {
			diags = append(diags, decodeString(attr, dst)...)
		}
	}
	if attr := content.Attributes["create_users"]; attr != nil {
		diags = append(diags, decodeBool(attr, &o.CreateUsers)...)
	}
	return o, diags
}

// decodeString decodes a string attribute with the diagnostics gohcl would give.
func decodeString(attr *hcl.Attribute, dst *string) hcl.Diagnostics {
	val, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return diags
	}
	val, err := convert.Convert(val, cty.String)
	if err == nil && val.IsNull() {
		err = errors.New("a string is required, not null")
	}
	if err != nil {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsuitable value type",
			Detail:   fmt.Sprintf("Unsuitable value for %s: %s", attr.Name, err),
			Subject:  attr.Expr.StartRange().Ptr(),
			Context:  attr.Expr.Range().Ptr(),
		})
	}
	*dst = val.AsString()
	return diags
}

// decodeBool decodes a bool attribute with the diagnostics gohcl would give.
func decodeBool(attr *hcl.Attribute, dst *bool) hcl.Diagnostics {
	val, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return diags
	}
	val, err := convert.Convert(val, cty.Bool)
	if err == nil && val.IsNull() {
		err = errors.New("a bool is required, not null")
	}
	if err != nil {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsuitable value type",
			Detail:   fmt.Sprintf("Unsuitable value for %s: %s", attr.Name, err),
			Subject:  attr.Expr.StartRange().Ptr(),
			Context:  attr.Expr.Range().Ptr(),
		})
	}
	*dst = val.True()
	return diags
}

// objectJSON converts the object value of attr to JSON; a missing or null attribute is
// "{}". With numbers set, every attribute of the object must be a number.
func objectJSON(attr *hcl.Attribute, numbers bool) (json.RawMessage, hcl.Diagnostics) {
	if attr == nil {
		return emptyObject(), nil
	}
	val, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return nil, diags
	}
	if val.IsNull() {
		return emptyObject(), nil
	}
	ty := val.Type()
	if !ty.IsObjectType() && !ty.IsMapType() {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid " + attr.Name,
			Detail:   fmt.Sprintf("%s must be an object, such as { key = \"value\" }.", attr.Name),
			Subject:  attr.Expr.Range().Ptr(),
		}}
	}
	if numbers {
		for it := val.ElementIterator(); it.Next(); {
			k, v := it.Element()
			if v.IsNull() || v.Type() != cty.Number {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid " + attr.Name,
					Detail:   fmt.Sprintf("%s %q must be a number, such as 8.", attr.Name, k.AsString()),
					Subject:  attr.Expr.Range().Ptr(),
				})
			}
		}
		if diags.HasErrors() {
			return nil, diags
		}
	}
	b, err := ctyjson.Marshal(val, ty)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid " + attr.Name,
			Detail:   fmt.Sprintf("%s cannot be converted to JSON.", attr.Name),
			Subject:  attr.Expr.Range().Ptr(),
		}}
	}
	return b, nil
}

// diagError returns the errors of diags, one a line and in file order, in hcl's compact
// form ("file:line,col-col: Summary; Detail"). hcl's diagnostic writer is not used
// because it prints the source line, which may hold the database password.
func diagError(diags hcl.Diagnostics) error {
	// hcl reports unsupported arguments in map order.
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil && b.Subject == nil:
			return 0
		case a.Subject == nil:
			return -1
		case b.Subject == nil:
			return 1
		}
		return a.Subject.Start.Byte - b.Subject.Start.Byte
	})
	var errs []error
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if d.Subject == nil {
			errs = append(errs, fmt.Errorf("%s; %s", d.Summary, d.Detail))
			continue
		}
		errs = append(errs, d)
	}
	return errors.Join(errs...)
}
