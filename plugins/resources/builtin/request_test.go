package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestParseRequestNamesTheField(t *testing.T) {
	long := "https://app.example.org/" + strings.Repeat("a", maxURILength)
	cases := []struct{ spec, field string }{
		{`[]`, "request"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"extra":1}`, "request"},
		{`{"name":"","redirect_uris":["https://a.example/cb"]}`, "request/name"},
		{`{"name":"App\u0007","redirect_uris":["https://a.example/cb"]}`, "request/name"},
		{`{"name":"App","redirect_uris":[]}`, "request/redirect_uris"},
		{`{"name":"App","redirect_uris":["/relative"]}`, "request/redirect_uris/0"},
		{`{"name":"App","redirect_uris":["https://a.example/cb","https://a.example/cb#x"]}`, "request/redirect_uris/1"},
		{`{"name":"App","redirect_uris":["https://user:pw@a.example/cb"]}`, "request/redirect_uris/0"},
		{`{"name":"App","redirect_uris":["https://a.example/cb","https://a.example/cb"]}`, "request/redirect_uris/1"},
		{`{"name":"App","redirect_uris":["` + long + `"]}`, "request/redirect_uris/0"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"scopes":["openid","phone"]}`, "request/scopes/1"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"allowed_groups":["ok","Not OK"]}`, "request/allowed_groups/1"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"allowed_groups":["ok","ok"]}`, "request/allowed_groups/1"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"issuer":"http://auth.example.org/"}`, "request/issuer"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"issuer":"https://example.org/auth"}`, "request/issuer"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"directory":{"url":"http://x","users_dn":"ou=u","groups_dn":"ou=g","bind_dn":"cn=b","bind_password":{"secret":"p"}}}`, "request/directory/url"},
		{`{"name":"App","redirect_uris":["https://a.example/cb"],"directory":{"url":"ldap://x","users_dn":"ou=u","groups_dn":"not a dn","bind_dn":"cn=b","bind_password":{"secret":"p"}}}`, "request/directory/groups_dn"},
	}
	for _, c := range cases {
		_, err := parseRequest(json.RawMessage(c.spec))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%s gave %v", c.spec, err)
		require.Equal(t, c.field, sdk.FieldOf(err), "%s: %v", c.spec, err)
		if len(c.spec) < 200 {
			// No message repeats the input.
			require.NotContains(t, err.Error(), "javascript")
		}
	}
	_, err := parseRequest(json.RawMessage(`{"name":"Miniflux","redirect_uris":["https://rss.example.org/oauth2/oidc/callback"],"allowed_groups":["miniflux-users"],"issuer":"https://auth.example.org/"}`))
	require.NoError(t, err)
}

// FuzzParseRequest checks that no request makes the parser panic, and that what it
// takes holds to the limits the provider relies on.
func FuzzParseRequest(f *testing.F) {
	f.Add(`{"name":"Miniflux","redirect_uris":["https://rss.example.org/oauth2/oidc/callback"],"allowed_groups":["miniflux-users"]}`)
	f.Add(`{"name":"x","redirect_uris":["http://127.0.0.1:8080/cb"],"scopes":["openid","groups"],"issuer":"https://auth.example.org:8443/"}`)
	f.Fuzz(func(t *testing.T, spec string) {
		r, err := parseRequest(json.RawMessage(spec))
		if err != nil {
			if sdk.FieldOf(err) == "" {
				t.Fatalf("a refusal names no field: %v", err)
			}
			return
		}
		if len(r.RedirectURIs) == 0 || len(r.RedirectURIs) > maxRedirectURIs || len(r.AllowedGroups) > maxGroups || len(r.Name) > 100 {
			t.Fatalf("taken beyond the limits: %+v", r)
		}
		for _, u := range r.RedirectURIs {
			if len(u) > maxURILength || strings.Contains(u, "#") {
				t.Fatalf("taken redirect URI %q", u)
			}
		}
	})
}
