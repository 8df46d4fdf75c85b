package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/mailpittest"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// withMail records the deployment's mail account as the engine does: the relay's
// account, its password kept by the secret provider, the mail row.
func withMail(t *testing.T, b *bundle, m *plugins.Manager, d store.Deployment, domain string) {
	t.Helper()
	ctx := context.Background()
	spec, _ := json.Marshal(contract.SMTPRequest{Sender: "noreply", Domain: domain})
	res, err := resourceClient(t, m, "relay").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: deploy.MailResource, Type: contract.SMTP, Spec: spec})
	require.NoError(t, err)
	var r contract.SMTPResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	secretSpec, _ := json.Marshal(contract.SecretRequest{Files: map[string]contract.SecretFile{"password": {Supplied: true}}})
	kept, err := resourceClient(t, m, "embedded").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: "mail-creds", Type: contract.Secret,
		Spec: secretSpec, Secrets: map[string][]byte{"password": res.Secrets[r.Password.Secret]}})
	require.NoError(t, err)
	var sr contract.SecretResult
	require.NoError(t, json.Unmarshal(kept.Data, &sr))
	ref := sr.Files["password"].Ref
	r.Password = contract.SecretRef{Secret: ref}
	raw, _ := json.Marshal(r)
	refs, _ := json.Marshal(map[string]string{"password": ref})
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: deploy.MailResource, Type: contract.SMTP, Provider: "relay",
		Spec: string(spec), Result: string(raw), SecretInstance: "mail-creds", SecretRefs: string(refs), State: store.ResourceProvisioned}))
}

var mailedLinkRE = regexp.MustCompile(`/set-password#([A-Za-z0-9_-]{43})`)

// The users page says where the invitation went and shows no link; the mail's link
// sets the password. A reset the relay refuses shows the link once, with why.
func TestUsersPageMailsTheLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	passFile := filepath.Join(t.TempDir(), "upstream-password")
	require.NoError(t, os.WriteFile(passFile, []byte("upstream password\n"), 0o600))
	mailpit, stop, err := mailpittest.Start(t.TempDir(), mailpittest.Options{Users: map[string]string{"relay": "upstream password"}})
	require.NoError(t, err)
	t.Cleanup(stop)
	port, err := child.FreePort()
	require.NoError(t, err)
	upHost, upPort, err := net.SplitHostPort(mailpit.SMTPAddr)
	require.NoError(t, err)
	b, m := setupDirectoryMail(t, fmt.Appendf(nil, `{"listen":"127.0.0.1:%d","tls":"none","upstream":{"host":%q,"port":%s,"tls":"none","user":"relay","password_file":%q}}`,
		port, upHost, upPort, passFile))
	alice := b.as(t, "alice")
	d := b.create(t, "alice", "acme")
	r := withDirectory(t, b, m, d, "miniflux-users")
	withMail(t, b, m, d, "acme.test")

	res, body := alice.post(t, "/deployments/"+d.ID+"/users", url.Values{"name": {"carol"}, "email": {"carol@example.net"}, "groups": {"miniflux-users"}})
	require.Equal(t, http.StatusCreated, res.StatusCode, body)
	require.Contains(t, body, "was sent to carol@example.net")
	require.Nil(t, linkRE.FindStringSubmatch(body), "a mailed link is not shown")
	msg, err := mailpit.WaitFor(ctx, "to:carol@example.net")
	require.NoError(t, err)
	text, err := mailpit.Text(ctx, msg.ID)
	require.NoError(t, err)
	link := mailedLinkRE.FindStringSubmatch(text)
	require.NotNil(t, link, "the mail holds the link: %s", text)
	status, body := setPassword(t, b, link[1], "a good long password", "a good long password")
	require.Equal(t, http.StatusOK, status, body)
	require.NoError(t, bindAs(t, r, "carol", "a good long password"))

	require.NoError(t, resourceClient(t, m, "relay").Deprovision(ctx, resource.DeprovisionRequest{Tenant: d.Namespace, Instance: deploy.MailResource, Type: contract.SMTP}))
	res, body = alice.post(t, "/deployments/"+d.ID+"/users/carol/reset", url.Values{})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "could not be mailed")
	shown := linkRE.FindStringSubmatch(body)
	require.NotNil(t, shown, "a link that could not be mailed is shown: %s", body)
	for _, e := range b.events(t) {
		raw, _ := json.Marshal(e)
		require.NotContains(t, string(raw), link[1])
		require.NotContains(t, string(raw), shown[2])
	}
}
