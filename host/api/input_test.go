package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/deploy"
)

// Strings from outside are bounded and plain before they are stored, and no refusal
// shows the value it refuses.
func TestStoredStringsAreBoundedAndNeverEchoed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, root := b.user(t, "alice", false), b.user(t, "root", true)
	long := strings.Repeat("x", 60<<10)
	for _, tc := range []struct {
		who        client
		path, body string
		location   string
		value      string
	}{
		{alice, "/api/v1/deployments", `{"namespace":"a1","name":"` + long + `"}`, "/name", long},
		{alice, "/api/v1/deployments", `{"namespace":"a2","name":"nul\u0000byte"}`, "/name", "nul"},
		{alice, "/api/v1/deployments", `{"namespace":"a3","name":"\u202egnp.exe"}`, "/name", "gnp.exe"},
		{alice, "/api/v1/deployments", `{"namespace":"` + long + `"}`, "/namespace", long},
		{alice, "/api/v1/tokens", `{"name":"zqx\there","lifetime_days":1}`, "/name", "zqx"},
		{alice, "/api/v1/tokens", `{"name":"\u2066isolate","lifetime_days":1}`, "/name", "isolate"},
		{root, "/api/v1/users", `{"name":"` + long + `"}`, "/name", long},
		{root, "/api/v1/users", `{"name":"Eve Smith"}`, "/name", "Eve Smith"},
	} {
		status, body := b.do(t, tc.who, "POST", tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, status, "%s %.80s: %.300s", tc.path, tc.body, body)
		require.Equal(t, "invalid_configuration", errorCode(t, body))
		require.Contains(t, string(body), `"location":"`+tc.location+`"`)
		require.NotContains(t, string(body), tc.value, "the refusal does not echo the value")
		require.Less(t, len(body), 1024)
	}
	ds, err := b.st.ListDeployments(context.Background(), "")
	require.NoError(t, err)
	require.Empty(t, ds, "nothing was stored")
}

// Each route reads a small body, a configuration route a larger one, an import (a whole
// migration string) the largest, and nothing reads more: an answer over the cap is 413
// with its own code.
func TestRequestBodiesAreCapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))

	big := func(n int) string { return `{"namespace":"b","name":"` + strings.Repeat("x", n) + `"}` }
	status, body = b.do(t, alice, "POST", "/api/v1/deployments", big(70<<10))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "body_too_large", errorCode(t, body))
	require.NotContains(t, string(body), "xxxx")

	// A configuration may be larger than a form, up to 1 MiB: this one is refused for the
	// deployment it names (none), not for its size; one over 1 MiB is not read.
	config := `{"domain":"acme.example.org","padding":"` + strings.Repeat("x", 512<<10) + `"}`
	status, body = b.do(t, alice, "POST", "/api/v1/deployments/nope/submit", config)
	require.Equal(t, http.StatusNotFound, status, "%.300s", body)
	// A configuration over 1 MiB is refused by its route.
	status, body = b.do(t, alice, "POST", "/api/v1/deployments/"+d.ID+"/submit", `{"padding":"`+strings.Repeat("x", 1100<<10)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "body_too_large", errorCode(t, body))
	// Over the server's cap (the import's: 4 MiB and 4 KiB), the server answers from the
	// length announced, before the body is sent.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.listen(t), "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /api/v1/deployments/"+d.ID+"/submit HTTP/1.1\r\nHost: fedhost.test\r\n"+
		"Content-Type: application/json\r\nContent-Length: 8388608\r\n\r\n{")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, "body_too_large", errorCode(t, raw))
}

// An operator holds at most max_deployments_per_operator deployments, destroyed ones not
// counted; superusers hold any number.
func TestDeploymentsPerOperatorAreLimited(t *testing.T) {
	t.Parallel()
	b := setupWith(t, api.DefaultServer, deploy.Options{MaxDeploymentsPerOperator: 2})
	alice, root := b.user(t, "alice", false), b.user(t, "root", true)
	var first api.Deployment
	for i, ns := range []string{"a1", "a2"} {
		status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"`+ns+`"}`)
		require.Equal(t, http.StatusCreated, status, "%s", body)
		if i == 0 {
			require.NoError(t, json.Unmarshal(body, &first))
		}
	}
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"a3"}`)
	require.Equal(t, http.StatusConflict, status, "%s", body)
	require.Equal(t, deploy.CodeLimitReached, errorCode(t, body))
	require.Contains(t, string(body), "max_deployments_per_operator")

	for _, ns := range []string{"r1", "r2", "r3"} {
		status, body := b.do(t, root, "POST", "/api/v1/deployments", `{"namespace":"`+ns+`"}`)
		require.Equal(t, http.StatusCreated, status, "a superuser is not limited: %s", body)
	}

	require.NoError(t, b.st.UpdateDeployment(context.Background(), first.ID, map[string]any{"state": deploy.StateDestroyed}))
	status, body = b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"a3"}`)
	require.Equal(t, http.StatusCreated, status, "a destroyed deployment does not count: %s", body)
}

// A query parameter that is not what the route takes is refused, naming it, and an app
// the deployment does not run has no backups to list.
func TestQueryParametersAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, root := b.user(t, "alice", false), b.user(t, "root", true)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"acme"}`)
	require.Equal(t, http.StatusCreated, status)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))

	for _, path := range []string{
		"/api/v1/deployments?limit=abc", "/api/v1/deployments?limit=0", "/api/v1/deployments?limit=99999999999999999999",
		"/api/v1/me/audit-events?limit=ten", "/api/v1/me/audit-events?limit=5000", "/api/v1/me/audit-events?after=-1",
	} {
		status, body := b.do(t, alice, "GET", path, "")
		require.Equal(t, http.StatusBadRequest, status, path)
		require.Equal(t, "invalid_configuration", errorCode(t, body), path)
		name := path[strings.Index(path, "?")+1 : strings.Index(path, "=")]
		require.Contains(t, string(body), `"location":"/`+name+`"`, path)
	}
	status, _ = b.do(t, root, "GET", "/api/v1/audit-events?limit=20", "")
	require.Equal(t, http.StatusOK, status)

	status, body = b.do(t, alice, "GET", "/api/v1/deployments/"+d.ID+"/backups?app=nope", "")
	require.Equal(t, http.StatusNotFound, status, "%s", body)
	require.Equal(t, "not_found", errorCode(t, body))
	require.Contains(t, string(body), `"location":"/app"`)
	require.NotContains(t, string(body), "nope")
}

// An account's audit events are its own (by it or about it), in order, paged by ?after=;
// the superuser's list has everyone's.
func TestOwnAuditEventsAreOnlyOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, bob, root := b.user(t, "alice", false), b.user(t, "bob", false), b.user(t, "root", true)
	var aliceID string
	for _, c := range []struct {
		who       client
		namespace string
	}{{alice, "alice1"}, {bob, "bob1"}, {alice, "alice2"}} {
		status, body := b.do(t, c.who, "POST", "/api/v1/deployments", `{"namespace":"`+c.namespace+`"}`)
		require.Equal(t, http.StatusCreated, status, "%s", body)
		var d api.Deployment
		require.NoError(t, json.Unmarshal(body, &d))
		if c.who == alice {
			aliceID = d.Owner
		}
	}
	events := func(who client, path string) []api.AuditEvent {
		status, body := b.do(t, who, "GET", path, "")
		require.Equal(t, http.StatusOK, status, "%s", body)
		var out []api.AuditEvent
		require.NoError(t, json.Unmarshal(body, &out))
		return out
	}
	var all []int64
	for _, e := range events(root, "/api/v1/audit-events") {
		all = append(all, e.Seq)
	}
	own := events(alice, "/api/v1/me/audit-events")
	require.NotEmpty(t, own)
	var creates int
	for i, e := range own {
		if e.Action == "deployment.create" {
			creates++
		}
		if i > 0 {
			require.Greater(t, e.Seq, own[i-1].Seq, "in order")
		}
		require.True(t, e.Actor == aliceID || e.Subject == aliceID, "by or about alice: %+v", e)
	}
	require.Equal(t, 2, creates, "alice's two creates, not bob's")
	require.Less(t, len(own), len(all), "the superuser's list holds more than alice's")
	later := events(alice, "/api/v1/me/audit-events?after="+strconv.FormatInt(own[0].Seq, 10))
	require.Equal(t, own[1:], later, "paged by after")
}
