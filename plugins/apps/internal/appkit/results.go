package appkit

import (
	"encoding/json"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Request builds a resource request with its spec encoded; the spec is a contract request
// type, so encoding cannot fail.
func Request(name, typ string, spec any, dependsOn ...string) app.ResourceRequest {
	b, err := json.Marshal(spec)
	if err != nil {
		panic("encoding a " + typ + " request: " + err.Error())
	}
	return app.ResourceRequest{Name: name, Type: typ, Spec: b, DependsOn: dependsOn}
}

// Results are the results a render got, checked against the requests of the same
// configuration.
type Results struct {
	byName map[string]json.RawMessage
	types  map[string]string
}

// CheckResults returns the results after checking that every request has one that
// follows its type's contract. A missing or wrong result is sdk.Invalid naming
// results/<request name>.
func CheckResults(reqs []app.ResourceRequest, results map[string]json.RawMessage) (*Results, error) {
	r := &Results{byName: results, types: map[string]string{}}
	for _, req := range reqs {
		raw, ok := results[req.Name]
		if !ok || len(raw) == 0 {
			return nil, sdk.Invalid("results/"+req.Name, "the %s result %q is missing: provision the request before rendering", req.Type, req.Name)
		}
		if err := contract.ValidateResult(req.Type, raw); err != nil {
			return nil, sdk.Invalid("results/"+req.Name, "the %s result %q does not follow its contract (%s)", req.Type, req.Name, sdk.FieldOf(err))
		}
		r.types[req.Name] = req.Type
	}
	return r, nil
}

// Has reports whether the configuration requested name.
func (r *Results) Has(name string) bool {
	_, ok := r.types[name]
	return ok
}

// Decode unmarshals the result of the request name into dst (a contract result type).
func (r *Results) Decode(name string, dst any) error {
	if !r.Has(name) {
		return sdk.Invalid("results/"+name, "the result %q is missing: provision the request before rendering", name)
	}
	if err := json.Unmarshal(r.byName[name], dst); err != nil {
		return sdk.Invalid("results/"+name, "the %s result %q cannot be read: %v", r.types[name], name, err)
	}
	return nil
}

// InvalidResult is the error for a result that lacks what the app asked for.
func InvalidResult(name, what string) error {
	return sdk.Invalid("results/"+name, "the result %q %s: provision it again with this configuration's request", name, what)
}

// SSO returns the request of single sign-on: a client of the deployment's OpenID
// provider whose redirect is the app's public URL (of its "http" port, which the host
// puts in for ${url:http}) and redirectPath, open to the members of groups. The host
// makes the deployment's directory with the app's role groups and completes the request
// with it and the issuer.
func SSO(appTitle, redirectPath string, groups []string) []app.ResourceRequest {
	return []app.ResourceRequest{
		Request("sso", contract.OIDC, contract.OIDCRequest{
			Name:          appTitle,
			RedirectURIs:  []string{RedirectURL(redirectPath)},
			Scopes:        []string{"openid", "profile", "email", "groups"},
			AllowedGroups: groups,
		}),
	}
}

// RedirectURL is the app's public URL and path, as a node's env or an oidc request
// gives it: the host puts the URL in for ${url:http}.
func RedirectURL(path string) string { return "${url:http}" + strings.TrimPrefix(path, "/") }

// Common are the results every OCI app here needs: its secrets, database, cache, media
// bucket and mail relay.
type Common struct {
	Secrets contract.SecretResult
	DB      contract.PostgreSQLResult
	Cache   contract.RedisResult
	Media   contract.S3Result
	Mail    contract.SMTPResult
}

// DecodeCommon decodes the results named secrets, db, cache, media and mail.
func DecodeCommon(res *Results) (Common, error) {
	var c Common
	for name, dst := range map[string]any{"secrets": &c.Secrets, "db": &c.DB, "cache": &c.Cache, "media": &c.Media, "mail": &c.Mail} {
		if err := res.Decode(name, dst); err != nil {
			return Common{}, err
		}
	}
	return c, nil
}
