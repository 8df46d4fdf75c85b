package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/sdk"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

// With an smtp provider the deployment's identity holds its mail account, From
// noreply@<domain>, checked by the provider; without, none. Mail finds the row and
// reveals its password (the real embedded provider), and is nil without a row.
func TestMailAccountIsPlannedAndRevealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	lock := plugins.Lock{}
	for name, pkg := range map[string]string{"fedhost-resource-embedded": "../../plugins/resources/embedded", "fedhost-resource-relay": "../../plugins/resources/relay"} {
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		require.NoError(t, err, "go build: %s", out)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(dir))
	port, err := child.FreePort()
	require.NoError(t, err)
	settings := func(d sdk.Description) (json.RawMessage, bool) {
		if d.Name == "relay" {
			return fmt.Appendf(nil, `{"listen":"127.0.0.1:%d","tls":"none","upstream":{"host":"127.0.0.1","port":1,"tls":"none"}}`, port), true
		}
		return nil, true
	}
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir(), Settings: settings})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })

	without := New(Options{Store: st, Plugins: m, Environment: []config.Resource{{Type: contract.Secret, Provider: "embedded"}}})
	id, err := without.planIdentity(ctx, "acme.test", nil, nil)
	require.NoError(t, err)
	require.Nil(t, id.Mail, "no smtp provider, no mail account")

	e := New(Options{Store: st, Plugins: m, Environment: []config.Resource{{Type: contract.Secret, Provider: "embedded"}, {Type: contract.SMTP, Provider: "relay"}}})
	id, err = e.planIdentity(ctx, "acme.test", nil, nil)
	require.NoError(t, err)
	require.NotNil(t, id.Mail)
	require.Equal(t, MailResource, id.Mail.Name)
	require.Empty(t, id.Mail.App)
	require.Equal(t, contract.SMTP, id.Mail.Type)
	require.Equal(t, "relay", id.Mail.Provider)
	require.JSONEq(t, `{"sender":"noreply","domain":"acme.test"}`, string(id.Mail.Spec))
	_, err = e.planIdentity(ctx, "not a domain", nil, nil)
	require.Error(t, err, "the provider checks the request")

	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Config: "{}", SecretRefs: "{}"})
	require.NoError(t, err)
	acct, pw, err := e.Mail(ctx, d.ID)
	require.NoError(t, err)
	require.Nil(t, acct)
	require.Nil(t, pw)
	refs, err := e.keep(ctx, d.Namespace, "mail-creds", map[string]contract.SecretFile{"password": {Supplied: true}}, map[string][]byte{"password": []byte("s3cret-mail")})
	require.NoError(t, err)
	want := contract.SMTPResult{Host: "127.0.0.1", Port: port, User: "acme.mail", Password: contract.SecretRef{Secret: refs["password"]}, From: "noreply@acme.test", TLS: "none"}
	raw, _ := json.Marshal(want)
	refsJSON, _ := json.Marshal(refs)
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: MailResource, Type: contract.SMTP, Provider: "relay",
		Result: string(raw), SecretInstance: "mail-creds", SecretRefs: string(refsJSON), State: store.ResourceProvisioned}))
	acct, pw, err = e.Mail(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, &want, acct)
	require.Equal(t, "s3cret-mail", string(pw))
}
