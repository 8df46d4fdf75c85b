package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// TestProvisionRefusals runs the provider in the test process: none of these cases
// reaches the directory.
func TestProvisionRefusals(t *testing.T) {
	p := newProvider()
	t.Cleanup(p.close)
	ctx := context.Background()
	require.NoError(t, p.Configure(ctx, json.RawMessage(`{"dir":`+jsonString(t.TempDir())+`}`)))
	dir := `{"url":"ldap://127.0.0.1:1/","base_dn":"ou=a,dc=x","users_dn":"ou=users,ou=a,dc=x","groups_dn":"ou=groups,ou=a,dc=x","bind_dn":"cn=a-dir,ou=a,dc=x","bind_password":{"secret":"bind-password"}}`
	spec := func(issuer string) json.RawMessage {
		return json.RawMessage(`{"name":"App","redirect_uris":["https://app.example.org/cb"],"issuer":"` + issuer + `","directory":` + dir + `}`)
	}
	secrets := map[string][]byte{"bind-password": []byte("a-password")}
	provision := func(tenant string, spec json.RawMessage, secrets map[string][]byte) error {
		_, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "app", Type: "oidc", Spec: spec, Secrets: secrets})
		return err
	}

	require.NoError(t, p.Validate(ctx, "oidc", json.RawMessage(`{"name":"App","redirect_uris":["https://app.example.org/cb"]}`)), "an app's request without what the host adds")
	err := provision("a", json.RawMessage(`{"name":"App","redirect_uris":["https://app.example.org/cb"]}`), secrets)
	require.Equal(t, "request/issuer", sdk.FieldOf(err), "%v", err)
	err = provision("a", spec("https://auth.a.example/"), nil)
	require.Equal(t, "secrets/bind-password", sdk.FieldOf(err), "%v", err)
	err = provision("a", spec("https://auth.a.example/"), map[string][]byte{"bind-password": []byte("pw"), clientSecretKey: []byte("short")})
	require.Equal(t, "secrets/"+clientSecretKey, sdk.FieldOf(err), "%v", err)
	err = provision("a", spec("https://auth.a.example/"), map[string][]byte{"bind-password": []byte("pw"), signingKeysKey: []byte(`{"keys":[{"kid":"k","pkcs8":"AAAA"}]}`)})
	require.Equal(t, "secrets/"+signingKeysKey, sdk.FieldOf(err), "%v", err)

	require.NoError(t, provision("a", spec("https://auth.a.example/"), secrets))
	err = provision("b", spec("https://AUTH.a.example:443/"), secrets)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "request/issuer", sdk.FieldOf(err), "two deployments at one issuer host")
	require.NoError(t, provision("b", spec("https://auth.b.example/"), secrets))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestUpstreamOfAnUnspecifiedListener(t *testing.T) {
	p := newProvider()
	t.Cleanup(p.close)
	ctx := context.Background()
	require.NoError(t, p.Configure(ctx, json.RawMessage(`{"listen":"0.0.0.0:0","dir":`+jsonString(t.TempDir())+`}`)))
	res, err := p.Provision(ctx, resource.Request{Tenant: "a", Instance: "app", Type: "oidc", Secrets: map[string][]byte{"bind-password": []byte("pw")},
		Spec: json.RawMessage(`{"name":"App","redirect_uris":["https://app.example.org/cb"],"issuer":"https://auth.a.example/","directory":{"url":"ldap://127.0.0.1:1/","base_dn":"ou=a,dc=x","users_dn":"ou=users,ou=a,dc=x","groups_dn":"ou=groups,ou=a,dc=x","bind_dn":"cn=a-dir,ou=a,dc=x","bind_password":{"secret":"bind-password"}}}`)})
	require.NoError(t, err)
	var r struct{ Upstream string }
	require.NoError(t, json.Unmarshal(res.Data, &r))
	require.Regexp(t, `^127\.0\.0\.1:[1-9][0-9]*$`, r.Upstream)
}
