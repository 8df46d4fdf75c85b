package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Directory finds the deployment's directory row and reveals its bind password from
// the secret resource (the real embedded provider); a deployment without one, or an
// app's ldap row only, is not_found.
func TestDirectoryRevealsTheBindPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fedhost-resource-embedded")
	out, err := exec.Command("go", "build", "-o", bin, "../../plugins/resources/embedded").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	sum, err := pluginclient.FileSHA256(bin)
	require.NoError(t, err)
	require.NoError(t, plugins.Lock{"fedhost-resource-embedded": sum}.Write(dir))
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := New(Options{Store: st, Plugins: m, Environment: []config.Resource{{Type: contract.Secret, Provider: "embedded"}}})
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}", SecretRefs: "{}"})
	require.NoError(t, err)

	notFound := func() {
		t.Helper()
		_, _, err := e.Directory(ctx, d.ID)
		var de *Error
		require.True(t, errors.As(err, &de), "%v", err)
		require.Equal(t, CodeNotFound, de.Code)
	}
	notFound()
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "miniflux-ldap", App: "miniflux", Type: contract.LDAP, Result: "{}", SecretRefs: "{}"}))
	notFound()

	refs, err := e.keep(ctx, d.Namespace, "directory-creds", map[string]contract.SecretFile{"bind-password": {Supplied: true}}, map[string][]byte{"bind-password": []byte("s3cret-bind")})
	require.NoError(t, err)
	want := contract.LDAPResult{URL: "ldap://127.0.0.1:389/", BaseDN: "ou=acme,dc=x", UsersDN: "ou=users,ou=acme,dc=x", GroupsDN: "ou=groups,ou=acme,dc=x",
		BindDN: "cn=acme-directory,ou=acme,dc=x", BindPassword: contract.SecretRef{Secret: refs["bind-password"]}}
	raw, _ := json.Marshal(want)
	refsJSON, _ := json.Marshal(refs)
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: DirectoryResource, Type: contract.LDAP, Provider: "openldap",
		Result: string(raw), SecretInstance: "directory-creds", SecretRefs: string(refsJSON), State: store.ResourceProvisioned}))
	got, pw, err := e.Directory(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, "s3cret-bind", string(pw))

	_, _, err = e.Directory(ctx, "nosuch")
	var de *Error
	require.True(t, errors.As(err, &de))
	require.Equal(t, CodeNotFound, de.Code)
}
