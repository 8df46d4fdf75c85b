package deploy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// An app's oidc request gets the deployment's issuer and directory from the host, which
// overrides whatever the app put there; the directory's bind password is the one secret
// of another resource the step names, so the host reveals it to the provider alone.
func TestCompleteOIDCSetsIssuerAndDirectory(t *testing.T) {
	t.Parallel()
	app, _ := json.Marshal(contract.OIDCRequest{Name: "Miniflux", RedirectURIs: []string{"https://feeds.acme.test/oauth2/oidc/callback"},
		AllowedGroups: []string{"miniflux-users"}, Issuer: "https://evil.example/"})
	dir, _ := json.Marshal(contract.LDAPResult{URL: "ldap://127.0.0.1:3890/", BaseDN: "ou=acme,dc=x", UsersDN: "ou=users,ou=acme,dc=x",
		GroupsDN: "ou=groups,ou=acme,dc=x", BindDN: "cn=acme-directory,ou=acme,dc=x", BindPassword: contract.SecretRef{Secret: "acme/directory-creds/bind-password@v1"}})
	spec, err := completeOIDC(app, "https://auth.acme.test:8443/", dir)
	require.NoError(t, err)
	require.NoError(t, contract.ValidateRequest(contract.OIDC, spec))
	var got contract.OIDCRequest
	require.NoError(t, json.Unmarshal(spec, &got))
	require.Equal(t, "https://auth.acme.test:8443/", got.Issuer)
	require.Equal(t, []string{"miniflux-users"}, got.AllowedGroups)
	require.Equal(t, "ou=users,ou=acme,dc=x", got.Directory.UsersDN)
	require.Equal(t, []string{"acme/directory-creds/bind-password@v1"}, specRefs(step{Type: contract.OIDC, Spec: spec}))
	require.Empty(t, specRefs(step{Type: contract.OIDC, Spec: app}), "an app's own request names no other resource's secret")

	_, err = completeOIDC(app, "https://auth.acme.test/", json.RawMessage(`"not a result"`))
	require.ErrorContains(t, err, "the deployment's directory")
}

// The nodes of an app that signs in get a private CA's root in a file SSL_CERT_FILE
// names; a node that sets SSL_CERT_FILE itself, or a public CA, changes nothing.
func TestTrustCA(t *testing.T) {
	t.Parallel()
	web, _ := json.Marshal(contract.InstanceRequest{Artifact: contract.Artifact{Binary: "miniflux"}, Env: map[string]string{"A": "1"}})
	own, _ := json.Marshal(contract.InstanceRequest{Artifact: contract.Artifact{Binary: "x"}, Env: map[string]string{"SSL_CERT_FILE": "/etc/own.pem"}})
	bare, _ := json.Marshal(contract.InstanceRequest{Artifact: contract.Artifact{Binary: "y"}})
	nodes := []step{{Name: "m-web", Spec: web}, {Name: "m-own", Spec: own}, {Name: "m-bare", Spec: bare}}
	require.NoError(t, trustCA(nodes, ""))
	require.JSONEq(t, string(web), string(nodes[0].Spec), "a public CA needs nothing")

	require.NoError(t, trustCA(nodes, "-----BEGIN CERTIFICATE-----\nROOT\n-----END CERTIFICATE-----\n"))
	for _, i := range []int{0, 2} {
		var got contract.InstanceRequest
		require.NoError(t, json.Unmarshal(nodes[i].Spec, &got))
		require.Equal(t, "${file:"+trustFile+"}", got.Env["SSL_CERT_FILE"], nodes[i].Name)
		require.Contains(t, got.Files[trustFile].Content, "ROOT", nodes[i].Name)
		require.NoError(t, contract.ValidateRequest(contract.Instance, nodes[i].Spec), nodes[i].Name)
	}
	require.JSONEq(t, string(own), string(nodes[1].Spec), "a node's own SSL_CERT_FILE is left alone")
}

// The deployment's sign-in shows among the web addresses, without an app, with its
// certificate, once the host has made its rows.
func TestFrontDoorShowsTheSignIn(t *testing.T) {
	t.Parallel()
	e := frontDoorEngine(contract.TLS, contract.Route)
	d := store.Deployment{ID: "d1", Domain: "acme.test", State: StateActive}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	auth := tlsRow(t, d.ID, "", "auth.acme.test", contract.TLSResult{Certificate: leafPEM(t, "auth.acme.test", now.Add(60*24*time.Hour))})
	auth.Name = authTLSInstance
	rows := []store.Resource{auth, {DeploymentID: d.ID, Name: authRouteInstance, Type: contract.Route, State: store.ResourceProvisioned}}
	fd := e.frontDoorOf(d, map[string]string{"": "auth.acme.test", "miniflux": "feeds.acme.test"}, rows, nil, now)
	require.Len(t, fd.Apps, 2)
	signIn := fd.Apps[0]
	require.Equal(t, "", signIn.App)
	require.Equal(t, "https://auth.acme.test:8443/", signIn.URL)
	require.True(t, signIn.Live)
	require.Equal(t, CertificateValid, signIn.Certificate.State)
	require.False(t, fd.Apps[1].Live, "miniflux has no route yet")
}
