package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/mailpittest"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// withMail has the relay make the deployment's mail account, From noreply@domain, and
// records it as the engine does: the mail row, its password in the secret resource.
func (b *directoryBundle) withMail(t *testing.T, d api.Deployment, domain string) {
	t.Helper()
	ctx := context.Background()
	spec, _ := json.Marshal(contract.SMTPRequest{Sender: "noreply", Domain: domain})
	res, err := b.client(t, "relay").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: deploy.MailResource, Type: contract.SMTP, Spec: spec})
	require.NoError(t, err)
	var r contract.SMTPResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	secretSpec, _ := json.Marshal(contract.SecretRequest{Files: map[string]contract.SecretFile{"password": {Supplied: true}}})
	kept, err := b.client(t, "embedded").Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: "mail-creds", Type: contract.Secret,
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

var mailedLink = regexp.MustCompile(`https?://\S+` + regexp.QuoteMeta(api.PasswordPage) + `#([A-Za-z0-9_-]{43})`)

// A deployment with a mail account mails the invitation and reset links: the operator
// sees where they went, not the link; the mail reaches mailpit through the relay, names
// the domain and the expiry, and its link, on the host's public_url, sets the password the
// user then binds with.
// When the relay refuses the account, the link is shown once with why.
func TestInvitationAndResetAreMailed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The relay's own account at its upstream, as the hosting provider's would be.
	passFile := filepath.Join(t.TempDir(), "upstream-password")
	require.NoError(t, os.WriteFile(passFile, []byte("upstream password\n"), 0o600))
	mailpit, stop, err := mailpittest.Start(t.TempDir(), mailpittest.Options{Users: map[string]string{"relay": "upstream password"}})
	require.NoError(t, err)
	t.Cleanup(stop)
	port, err := child.FreePort()
	require.NoError(t, err)
	upHost, upPort, err := net.SplitHostPort(mailpit.SMTPAddr)
	require.NoError(t, err)
	relay := fmt.Appendf(nil, `{"listen":"127.0.0.1:%d","tls":"none","upstream":{"host":%q,"port":%s,"tls":"none","user":"relay","password_file":%q}}`, port, upHost, upPort, passFile)
	b := setupDirectoryMail(t, relay, "https://fedhost.example")
	alice := b.user(t, "alice", false)
	d := b.deployment(t, alice, "acme")
	base := "/api/v1/deployments/" + d.ID
	r := b.withDirectory(t, d, "miniflux-users")
	b.withMail(t, d, "acme.test")

	status, body := b.do(t, alice, "POST", base+"/users", `{"name":"carol","email":"carol@example.net","groups":["miniflux-users"]}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var added api.NewUserAnswer
	require.NoError(t, json.Unmarshal(body, &added))
	require.Equal(t, "carol@example.net", added.Link.SentTo, "%s", body)
	require.Empty(t, added.Link.URL, "a mailed link is not shown")
	require.Empty(t, added.Link.MailError)

	msg, err := mailpit.WaitFor(ctx, "to:carol@example.net")
	require.NoError(t, err)
	require.Equal(t, "noreply@acme.test", msg.From.Address)
	text, err := mailpit.Text(ctx, msg.ID)
	require.NoError(t, err)
	require.Contains(t, text, "acme.test")
	require.Contains(t, text, added.Link.ExpiresAt.UTC().Format("2 January 2006, 15:04"), "the mail says until when the link works")
	m := mailedLink.FindStringSubmatch(text)
	require.NotNil(t, m, "the mail holds the link: %s", text)
	require.Contains(t, text, "https://fedhost.example"+api.PasswordPage+"#", "the link is on public_url, not the request's address")
	token := m[1]

	status, body = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+token+`","password":"carol's good password"}`)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	require.NoError(t, b.bind(t, r, "carol", "carol's good password"))

	require.NoError(t, mailpit.DeleteAll(ctx))
	status, body = b.do(t, alice, "POST", base+"/users/carol/reset", "")
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var reset api.PasswordLink
	require.NoError(t, json.Unmarshal(body, &reset))
	require.Equal(t, "carol@example.net", reset.SentTo, "%s", body)
	msg, err = mailpit.WaitFor(ctx, "to:carol@example.net")
	require.NoError(t, err)
	require.Contains(t, msg.Subject, "new password")
	text, err = mailpit.Text(ctx, msg.ID)
	require.NoError(t, err)
	m = mailedLink.FindStringSubmatch(text)
	require.NotNil(t, m, "the reset mail holds the link: %s", text)
	resetToken := m[1]
	status, body = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+resetToken+`","password":"carol's new password"}`)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	require.NoError(t, b.bind(t, r, "carol", "carol's new password"))

	// A user without an address gets the link shown, as without a mail account.
	status, body = b.do(t, alice, "POST", base+"/users", `{"name":"dave"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var shown api.NewUserAnswer
	require.NoError(t, json.Unmarshal(body, &shown))
	require.Empty(t, shown.Link.SentTo)
	tokenOf(t, shown.Link)

	// The relay no longer knows the account: the link is made and shown, with why.
	require.NoError(t, b.client(t, "relay").Deprovision(ctx, resource.DeprovisionRequest{Tenant: d.Namespace, Instance: deploy.MailResource, Type: contract.SMTP}))
	status, body = b.do(t, alice, "POST", base+"/users/carol/reset", "")
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var failed api.PasswordLink
	require.NoError(t, json.Unmarshal(body, &failed))
	require.Empty(t, failed.SentTo)
	require.Contains(t, failed.MailError, "AUTH", "%s", body)
	failedToken := tokenOf(t, failed)
	require.NotContains(t, failed.MailError, failedToken)
	status, body = b.do(t, client{}, "POST", "/api/v1/password-links/use", `{"token":"`+failedToken+`","password":"carol's third password"}`)
	require.Equal(t, http.StatusNoContent, status, "the link shown works: %s", body)
	require.NoError(t, b.bind(t, r, "carol", "carol's third password"))

	events, err := b.st.AuditEvents(ctx, 0, 1000)
	require.NoError(t, err)
	for _, e := range events {
		raw, _ := json.Marshal(e)
		for _, secret := range []string{token, resetToken, failedToken} {
			require.False(t, strings.Contains(string(raw), secret), "no audit event holds a link's token")
		}
	}
}
