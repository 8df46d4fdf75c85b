package api_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

func (b *bundle) id(t *testing.T, cl client) string {
	t.Helper()
	status, body := b.do(t, cl, "GET", "/api/v1/me", "")
	require.Equal(t, 200, status, "%s", body)
	var me api.Me
	require.NoError(t, json.Unmarshal(body, &me))
	return me.ID
}

// Contacts, domains and usage are each operator's own: another operator neither sees
// nor changes them, a superuser sees every operator's usage; a bad contact is refused
// naming the field; usage is JSON or CSV.
func TestDomainsContactsAndUsageAreTheOperatorsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	alice, bob, root := b.user(t, "alice", false), b.user(t, "bob", false), b.user(t, "root", true)
	aliceID := b.id(t, alice)

	status, body := b.do(t, alice, "POST", "/api/v1/contacts", `{"name":"Alice","email":"alice@acme.test","phone":"030 1234","street":"Hauptstr. 1","city":"Berlin","postal_code":"10115","country":"DE"}`)
	require.Equal(t, 400, status, "%s", body)
	var refusal struct{ Error api.Error }
	require.NoError(t, json.Unmarshal(body, &refusal))
	require.Equal(t, "/phone", refusal.Error.Location)
	require.NotContains(t, string(body), "030 1234", "the error does not echo the input")
	status, body = b.do(t, alice, "POST", "/api/v1/contacts", `{"name":"Alice","email":"alice@acme.test","phone":"+4930123456","street":"Hauptstr. 1","city":"Berlin","postal_code":"10115","country":"DE"}`)
	require.Equal(t, 201, status, "%s", body)
	var contact api.Contact
	require.NoError(t, json.Unmarshal(body, &contact))
	status, body = b.do(t, bob, "GET", "/api/v1/contacts", "")
	require.Equal(t, 200, status)
	require.JSONEq(t, `[]`, string(body))
	status, _ = b.do(t, bob, "PUT", "/api/v1/contacts/"+contact.ID, `{"name":"Bob","email":"bob@bob.test","phone":"+4930123456","street":"x","city":"y","postal_code":"1","country":"FR"}`)
	require.Equal(t, 404, status, "bob cannot change alice's contact")

	status, body = b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, 201, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	exp := time.Date(2027, 5, 31, 0, 0, 0, 0, time.UTC)
	require.NoError(t, b.st.PutDomain(ctx, store.Domain{Name: "acme.test", DeploymentID: d.ID, Owner: aliceID, Mode: store.DomainRegistered,
		Registrar: "porkbun", State: "active", Nameservers: "ns1.provider.test ns2.provider.test", ExpiresAt: &exp, Locked: true}))
	_, err := b.st.RecordDomainEvent(ctx, store.DomainEvent{Time: time.Date(2026, 5, 31, 13, 0, 0, 0, time.UTC), Domain: "acme.test", DeploymentID: d.ID,
		Owner: aliceID, Registrar: "porkbun", Kind: store.DomainEventRegistration, CostMicros: 9_730_000, Currency: "USD"})
	require.NoError(t, err)

	status, body = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID+"/domain", "")
	require.Equal(t, 200, status, "%s", body)
	var dom api.Domain
	require.NoError(t, json.Unmarshal(body, &dom))
	require.Equal(t, []string{"ns1.provider.test", "ns2.provider.test"}, dom.Nameservers)
	require.Len(t, dom.Events, 1)
	require.Equal(t, int64(9_730_000), dom.Events[0].CostMicros)
	status, _ = b.do(t, bob, "GET", "/api/v1/deployments/"+d.ID+"/domain", "")
	require.Equal(t, 403, status)
	status, _ = b.do(t, bob, "POST", "/api/v1/deployments/"+d.ID+"/domain/authcode", "")
	require.Equal(t, 403, status)
	status, body = b.do(t, bob, "GET", "/api/v1/domains", "")
	require.Equal(t, 200, status)
	require.JSONEq(t, `[]`, string(body))
	status, body = b.do(t, root, "GET", "/api/v1/domains", "")
	require.Equal(t, 200, status)
	require.Contains(t, string(body), "acme.test")

	usage := func(cl client, query string) deploy.Usage {
		status, body := b.do(t, cl, "GET", "/api/v1/usage?from=2026-05-01&to=2026-07-01"+query, "")
		require.Equal(t, 200, status, "%s", body)
		var u deploy.Usage
		require.NoError(t, json.Unmarshal(body, &u))
		return u
	}
	require.Len(t, usage(alice, "").Events, 1)
	require.Equal(t, []deploy.UsageTotal{{Owner: aliceID, Month: "2026-05", Currency: "USD", CostMicros: 9_730_000}}, usage(alice, "").Totals)
	require.Empty(t, usage(bob, "").Events, "bob sees none of alice's usage")
	require.Empty(t, usage(bob, "&owner="+aliceID).Events, "an operator cannot ask for another's")
	require.Len(t, usage(root, "").Events, 1, "a superuser sees every operator's")

	status, body = b.do(t, alice, "GET", "/api/v1/usage?from=2026-05-01&to=2026-07-01&format=csv", "")
	require.Equal(t, 200, status)
	rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	require.NoError(t, err)
	require.Equal(t, "record", rows[0][0])
	require.Equal(t, []string{"event", aliceID, "2026-05", d.ID, "acme.test", "registration", "2026-05-31T13:00:00Z", "2026-05-31T13:00:00Z", "", "9730000", "USD", ""}, rows[1])

	status, body = b.do(t, alice, "GET", "/api/v1/usage?from=yesterday", "")
	require.Equal(t, 400, status)
	require.NoError(t, json.Unmarshal(body, &refusal))
	require.Equal(t, "/from", refusal.Error.Location)
}
