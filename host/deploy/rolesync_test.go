package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/ldaptest"
	"github.com/fedhost/fedhost/sdk/app"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// withDirectory gives the bundle's deployment a directory on a real slapd, made by the
// openldap provider and kept as the engine keeps it.
func (b *runsBundle) withDirectory(t *testing.T) *directory.Directory {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, stop, err := ldaptest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(stop)
	bin := filepath.Join(dir, "fedhost-resource-openldap")
	goBuild(t, bin, "../../plugins/resources/openldap")
	p, err := pluginclient.Start(ctx, bin)
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, fmt.Appendf(nil, `{"url":%q,"base_dn":%q,"admin_dn":%q,"admin_password_file":%q}`, s.URL, s.BaseDN, s.AdminDN, s.AdminPasswordFile)))
	spec, _ := json.Marshal(contract.LDAPRequest{Groups: []string{"ops-admins", "ops-users"}})
	res, err := p.Resource().Provision(ctx, resource.Request{Tenant: b.d.Namespace, Instance: DirectoryResource, Type: contract.LDAP, Spec: spec})
	require.NoError(t, err)
	var r contract.LDAPResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	pw := res.Secrets[r.BindPassword.Secret]
	refs, err := b.e.keep(ctx, b.d.Namespace, "directory-creds", map[string]contract.SecretFile{"bind-password": {Supplied: true}},
		map[string][]byte{"bind-password": pw})
	require.NoError(t, err)
	r.BindPassword.Secret = refs["bind-password"]
	raw, _ := json.Marshal(r)
	refsJSON, _ := json.Marshal(refs)
	require.NoError(t, b.st.PutResource(ctx, store.Resource{DeploymentID: b.d.ID, Name: DirectoryResource, Type: contract.LDAP,
		Result: string(raw), SecretRefs: string(refsJSON), SecretInstance: "directory-creds", State: store.ResourceProvisioned}))
	d, err := directory.New(r, pw)
	require.NoError(t, err)
	return d
}

// The apps' roles follow the directory: a sync is a run of the app's sync-roles with the
// members of its role groups who are not disabled; the operator can neither list nor run
// it; the timer syncs again after a failure and not after a recent success.
func TestRolesFollowTheDirectory(t *testing.T) {
	b := setupRuns(t)
	dir := b.withDirectory(t)
	ctx := context.Background()
	for _, u := range []directory.User{
		{Name: "alice", Groups: []string{"ops-admins", "ops-users"}},
		{Name: "bob", Groups: []string{"ops-users"}},
		{Name: "carol", Groups: []string{"ops-admins"}},
	} {
		require.NoError(t, dir.Add(u))
	}
	require.NoError(t, dir.SetDisabled("carol", true))

	sync := func(actor string) (store.Run, string) {
		t.Helper()
		runs, err := b.e.SyncRoles(ctx, b.d.ID, actor)
		require.NoError(t, err)
		require.Len(t, runs, 1)
		r := b.wait(t, runs[0].ID, finished)
		return r, b.output(t, r.ID, "stdout")
	}
	r, out := sync("operator")
	require.Equal(t, store.RunSucceeded, r.State, r.Reason)
	require.Equal(t, "opsapp", r.App)
	require.Equal(t, app.OperationSyncRoles, r.Operation)
	require.Equal(t, "operator", r.Actor)
	require.JSONEq(t, `{"ops-admins": ["alice"], "ops-users": ["alice", "bob"]}`, firstLine(out))

	// The operator sees no sync-roles among the operations and cannot start one.
	ops, err := b.e.Operations(ctx, b.d.ID)
	require.NoError(t, err)
	require.False(t, slices.ContainsFunc(ops, func(op AppOperation) bool { return op.Name == app.OperationSyncRoles }))
	_, err = b.e.StartRun(ctx, b.d.ID, RunRequest{App: "opsapp", Operation: app.OperationSyncRoles, Input: json.RawMessage(`{"members": {}}`), Actor: "mallory"})
	require.Error(t, err)

	// A recent good sync: the timer (the tick's, on the deployments with a directory) queues none.
	n, err := b.e.tickRoleSyncs(ctx, b.clock.Now())
	require.NoError(t, err)
	require.Zero(t, n)

	// A sync that fails is a failed run; the timer syncs again a minute later, then waits
	// twice as long at each failure in a row: an app that stays down does not add a failed
	// run at every tick.
	require.NoError(t, dir.Add(directory.User{Name: "fail", Groups: []string{"ops-admins"}}))
	r, _ = sync("operator")
	require.Equal(t, store.RunFailed, r.State)
	// A run's time is the store's: the ticks below are set from the last run's.
	n, err = b.e.tickRoleSyncs(ctx, r.CreatedAt.Add(time.Second))
	require.NoError(t, err)
	require.Zero(t, n, "no retry at the next tick")
	for _, wait := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		n, err = b.e.tickRoleSyncs(ctx, r.CreatedAt.Add(wait-time.Second))
		require.NoError(t, err)
		require.Zero(t, n, "no retry before %s", wait)
		n, err = b.e.tickRoleSyncs(ctx, r.CreatedAt.Add(wait))
		require.NoError(t, err)
		require.Equal(t, 1, n, "a retry after %s", wait)
		runs, err := b.st.ListRuns(ctx, b.d.ID, 1)
		require.NoError(t, err)
		r = b.wait(t, runs[0].ID, finished)
		require.Equal(t, RoleSyncActor, r.Actor)
		require.Equal(t, store.RunScheduled, r.Trigger)
		require.Equal(t, store.RunFailed, r.State)
	}

	// Once it holds again, the timer waits an interval after a good sync.
	require.NoError(t, dir.Delete("fail"))
	n, err = b.e.tickRoleSyncs(ctx, r.CreatedAt.Add(8*time.Minute-time.Second))
	require.NoError(t, err)
	require.Zero(t, n, "no retry before 8m")
	n, err = b.e.tickRoleSyncs(ctx, r.CreatedAt.Add(8*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	runs, err := b.st.ListRuns(ctx, b.d.ID, 1)
	require.NoError(t, err)
	r = b.wait(t, runs[0].ID, finished)
	require.Equal(t, store.RunSucceeded, r.State, r.Reason)
	n, err = b.e.tickRoleSyncs(ctx, r.CreatedAt.Add(30*time.Minute))
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = b.e.tickRoleSyncs(ctx, r.CreatedAt.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
