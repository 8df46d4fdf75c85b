package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Each type's example request and result, as the Go types marshal them, pass the schemas:
// the Go types and the schemas agree.
func TestGoTypesMatchSchemas(t *testing.T) {
	t.Parallel()
	pw := contract.SecretRef{Secret: "password"}
	cases := []struct {
		typ             string
		request, result any
	}{
		{contract.Secret,
			contract.SecretRequest{Files: map[string]contract.SecretFile{
				"admin-password": {Generate: &contract.Generate{Length: 24, Encoding: "alphanumeric"}},
				"signing-key":    {Generate: &contract.Generate{KeyPair: "ed25519"}},
				"smtp-password":  {Supplied: true},
			}},
			contract.SecretResult{Files: map[string]contract.SecretFileResult{"admin-password": {Ref: "t/i/admin-password", Version: 1}}}},
		{contract.PostgreSQL, contract.PostgreSQLRequest{Extensions: []string{"pg_trgm"}},
			contract.PostgreSQLResult{Host: "127.0.0.1", Port: 5432, Database: "t-db", User: "t-db", Password: pw, SSLMode: "disable"}},
		{contract.S3,
			contract.S3Request{Buckets: map[string]contract.S3Bucket{"media": {Website: true, CORS: []contract.S3CORS{{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}}}}},
				Keys: map[string]contract.S3Key{"app": {Grants: map[string]string{"media": "owner"}}}},
			contract.S3Result{Endpoint: "http://127.0.0.1:7070", Region: "us-east-1", Buckets: map[string]string{"media": "t-media"},
				Keys: map[string]contract.S3Access{"app": {AccessKeyID: "AK", SecretAccessKey: contract.SecretRef{Secret: "key-app"}}}}},
		{contract.Redis, contract.RedisRequest{}, contract.RedisResult{Host: "127.0.0.1", Port: 6379, User: "t-cache", Password: pw, KeyPrefix: "t:cache:"}},
		{contract.SMTP, contract.SMTPRequest{Sender: "noreply", Domain: "example.org"},
			contract.SMTPResult{Host: "127.0.0.1", Port: 1025, User: "t", Password: pw, From: "noreply@example.org", TLS: "none"}},
		{contract.DNS, contract.DNSRequest{Zone: "example.org", Records: []contract.DNSRecord{{Name: "@", Type: "A", Value: "192.0.2.1"}}},
			contract.DNSResult{Zone: "example.org", Nameservers: []string{"ns1.example.net"}, Records: []contract.DNSRecord{},
				Update: &contract.DNSUpdate{Server: "192.0.2.53:53", KeyName: "main.t.fedhost.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "tsig-secret"}}}},
		{contract.TLS, contract.TLSRequest{Domains: []string{"example.org"}, Challenge: "dns-01",
			DNS: &contract.DNSUpdate{Server: "192.0.2.53:53", KeyName: "main.t.fedhost.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "t-dns-creds/tsig"}}},
			contract.TLSResult{Certificate: "PEM", Key: contract.SecretRef{Secret: "key"}, NotAfter: "2027-01-01T00:00:00Z",
				Issuer: "Pebble Intermediate CA", RenewAfter: "2026-12-02T00:00:00Z"}},
		{contract.LDAP, contract.LDAPRequest{Groups: []string{"admins"}},
			contract.LDAPResult{URL: "ldap://127.0.0.1:389", BaseDN: "ou=t,dc=example", UsersDN: "ou=users,ou=t,dc=example", GroupsDN: "ou=groups,ou=t,dc=example", BindDN: "cn=t,dc=example", BindPassword: pw}},
		{contract.OIDC, contract.OIDCRequest{Name: "Miniflux", RedirectURIs: []string{"https://rss.example.org/oauth2/oidc/callback", "${url:http}oauth2/oidc/callback"},
			AllowedGroups: []string{"miniflux-users"}, Issuer: "https://auth.example.org/",
			Directory: &contract.LDAPResult{URL: "ldap://127.0.0.1:3890/", BaseDN: "ou=t,dc=x", UsersDN: "ou=users,ou=t,dc=x",
				GroupsDN: "ou=groups,ou=t,dc=x", BindDN: "cn=t-directory,ou=t,dc=x", BindPassword: contract.SecretRef{Secret: "t-directory-creds/bind-password"}}},
			contract.OIDCResult{Issuer: "https://id.example.org", ClientID: "miniflux", ClientSecret: contract.SecretRef{Secret: "client-secret"}, Upstream: "127.0.0.1:40002"}},
		{contract.Instance,
			contract.InstanceRequest{Artifact: contract.Artifact{Binary: "miniflux"}, Env: map[string]string{"LISTEN_ADDR": "${host}:${port:http}"},
				Files: map[string]contract.InstanceFile{"database-url": {Content: "postgres://u:${secret:db}@h/d"}},
				Ports: []contract.Port{{Name: "http", Protocol: "http"}}, Health: &contract.Health{Port: "http", HTTPPath: "/healthcheck"}},
			contract.InstanceResult{State: "running", Addresses: map[string]string{"http": "127.0.0.1:40001"}}},
		{contract.Route,
			contract.RouteRequest{Hosts: []string{"feeds.example.org"}, Upstream: "127.0.0.1:40001",
				TLS: &contract.RouteTLS{Certificate: "PEM", Key: contract.SecretRef{Secret: "t-feeds-tls-creds/key"}}},
			contract.RouteResult{URLs: []string{"https://feeds.example.org/"}}},
	}
	require.Len(t, cases, len(contract.Types), "every type has a case")
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			req, err := json.Marshal(c.request)
			require.NoError(t, err)
			require.NoError(t, contract.ValidateRequest(c.typ, req))
			res, err := json.Marshal(c.result)
			require.NoError(t, err)
			require.NoError(t, contract.ValidateResult(c.typ, res))
		})
	}
}

func TestInvalidRequestNamesTheFieldNotTheValue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ, spec, field string
	}{
		{contract.Secret, `{"files":{"pw":{"generate":{"length":4}}}}`, "request/files/pw"},
		{contract.Secret, `{"files":{"Bad Name":{"supplied":true}}}`, "request/files"},
		{contract.S3, `{"buckets":{"media":{}},"keys":{"app":{"grants":{"media":"sudo-secret-grant"}}}}`, "request/keys/app/grants/media"},
		{contract.PostgreSQL, `{"extensions":"pg_trgm"}`, "request/extensions"},
		{contract.Instance, `{"artifact":{"binary":"x"},"ports":[{"name":"http","protocol":"udp"}]}`, "request/ports/0/protocol"},
		{contract.OIDC, `{"name":"x","redirect_uris":["https://x.example/cb"],"allowed_groups":["Sudo-Secret-Grant"]}`, "request/allowed_groups/0"},
		{contract.OIDC, `{"name":"x","redirect_uris":["javascript:sudo-secret-grant"]}`, "request/redirect_uris/0"},
		{contract.OIDC, `{"name":"x","redirect_uris":["${file:sudo-secret-grant}/cb"]}`, "request/redirect_uris/0"},
	}
	for _, c := range cases {
		err := contract.ValidateRequest(c.typ, json.RawMessage(c.spec))
		require.Error(t, err, c.spec)
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
		require.Contains(t, sdk.FieldOf(err), c.field, c.spec)
		require.NotContains(t, err.Error(), "sudo-secret-grant")
	}
}
