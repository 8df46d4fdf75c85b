package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/go-ldap/ldap/v3"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

const (
	maxRedirectURIs = 20
	maxURILength    = 2000
	maxGroups       = 100
	maxDNLength     = 512
)

// groupRE is the contract's pattern for a group name.
var groupRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// offeredScopes are the scopes a client may ask for; a request naming none gets them all.
var offeredScopes = []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail, scopeGroups, oidc.ScopeOfflineAccess}

// parseRequest reads and checks an oidc request. The issuer and the directory, which the
// host sets, are checked when present; Provision requires them.
func parseRequest(spec json.RawMessage) (contract.OIDCRequest, error) {
	var r contract.OIDCRequest
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		// The decoder's message quotes the input; this one does not.
		return r, sdk.Invalid("request", "not an oidc request: an object with name, redirect_uris and optionally scopes and allowed_groups")
	}
	if r.Name == "" || len(r.Name) > 100 || strings.IndexFunc(r.Name, unicode.IsControl) >= 0 {
		return r, sdk.Invalid("request/name", "the app's name is 1 to 100 characters without control characters")
	}
	if len(r.RedirectURIs) == 0 || len(r.RedirectURIs) > maxRedirectURIs {
		return r, sdk.Invalid("request/redirect_uris", "give 1 to %d redirect URIs", maxRedirectURIs)
	}
	for i, raw := range r.RedirectURIs {
		field := fmt.Sprintf("request/redirect_uris/%d", i)
		if err := checkRedirectURI(raw); err != "" {
			return r, sdk.Invalid(field, "%s", err)
		}
		if slices.Index(r.RedirectURIs, raw) < i {
			return r, sdk.Invalid(field, "this redirect URI is listed twice")
		}
	}
	for i, s := range r.Scopes {
		if !slices.Contains(offeredScopes, s) {
			return r, sdk.Invalid(fmt.Sprintf("request/scopes/%d", i), "not a scope the provider offers: one of %s", strings.Join(offeredScopes, ", "))
		}
	}
	if len(r.AllowedGroups) > maxGroups {
		return r, sdk.Invalid("request/allowed_groups", "at most %d groups", maxGroups)
	}
	for i, g := range r.AllowedGroups {
		field := fmt.Sprintf("request/allowed_groups/%d", i)
		if !groupRE.MatchString(g) {
			return r, sdk.Invalid(field, "a group name is 1 to 63 lower-case letters, digits and hyphens, starting with a letter")
		}
		if slices.Index(r.AllowedGroups, g) < i {
			return r, sdk.Invalid(field, "this group is listed twice")
		}
	}
	if r.Issuer != "" {
		if _, err := issuerHost(r.Issuer); err != "" {
			return r, sdk.Invalid("request/issuer", "%s", err)
		}
	}
	if r.Directory != nil {
		if err := checkDirectory(r.Directory); err != nil {
			return r, err
		}
	}
	return r, nil
}

func checkRedirectURI(raw string) string {
	if len(raw) > maxURILength {
		return fmt.Sprintf("a redirect URI is at most %d characters", maxURILength)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return "not an absolute http or https URL, such as https://app.example.org/oauth2/oidc/callback"
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "a redirect URI has no fragment (#...)"
	}
	if u.User != nil {
		return "a redirect URI has no user name or password in it"
	}
	return ""
}

// issuerHost checks an issuer URL and returns the host key requests for it arrive with.
func issuerHost(raw string) (string, string) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(raw) > 300 {
		return "", "not an https URL without query or fragment, such as https://auth.example.org/"
	}
	if u.Path != "" && u.Path != "/" {
		return "", "the issuer is served at the root of its host: https://auth.example.org/"
	}
	return hostKey(u.Host), ""
}

func checkDirectory(d *contract.LDAPResult) error {
	u, err := url.Parse(d.URL)
	if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Host == "" || len(d.URL) > maxDNLength {
		return sdk.Invalid("request/directory/url", "not an ldap:// or ldaps:// URL with a host")
	}
	for _, f := range []struct{ field, dn string }{{"users_dn", d.UsersDN}, {"groups_dn", d.GroupsDN}, {"bind_dn", d.BindDN}} {
		field, dn := f.field, f.dn
		if _, err := ldap.ParseDN(dn); err != nil || dn == "" || len(dn) > maxDNLength {
			return sdk.Invalid("request/directory/"+field, "not a DN such as ou=users,ou=acme,dc=example,dc=org")
		}
	}
	if d.BindPassword.Secret == "" {
		return sdk.Invalid("request/directory/bind_password/secret", "name the secret that holds the bind password")
	}
	return nil
}
