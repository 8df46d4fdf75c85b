package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestOrderPutsDependenciesFirstAndTypesInRank(t *testing.T) {
	t.Parallel()
	steps := []step{
		{Name: "a-web", Type: "instance"},
		{Name: "a-sso", Type: "oidc", DependsOn: []string{"a-directory"}},
		{Name: "a-db", Type: "postgresql"},
		{Name: "a-directory", Type: "ldap"},
		{Name: "a-secrets", Type: "secret"},
		{Name: "a-tls", Type: "tls", DependsOn: []string{"a-dns"}},
		{Name: "a-dns", Type: "dns"},
	}
	require.NoError(t, order(steps))
	pos := map[string]int{}
	for i, s := range steps {
		pos[s.Name] = i
	}
	require.Less(t, pos["a-secrets"], pos["a-db"])
	require.Less(t, pos["a-directory"], pos["a-sso"])
	require.Less(t, pos["a-dns"], pos["a-tls"])
	require.Equal(t, len(steps)-1, pos["a-web"], "instances last")

	err := order([]step{{Name: "a-x", Request: "x", Type: "secret", DependsOn: []string{"a-missing"}}})
	require.ErrorContains(t, err, "request x depends on a-missing")
}

// A circle of dependencies is refused, naming its requests, instead of swapping forever.
func TestOrderRefusesACircle(t *testing.T) {
	t.Parallel()
	done := make(chan error, 1)
	go func() {
		done <- order([]step{
			{Name: "a-db", Request: "db", Type: "postgresql"},
			{Name: "a-x", Request: "x", Type: "secret", DependsOn: []string{"a-y"}},
			{Name: "a-y", Request: "y", Type: "secret", DependsOn: []string{"a-x"}},
		})
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "requests x, y depend on each other in a circle")
	case <-time.After(10 * time.Second):
		t.Fatal("order did not return on a circle of dependencies")
	}
	require.ErrorContains(t, order([]step{{Name: "a-x", Request: "x", Type: "secret", DependsOn: []string{"a-x"}}}), "requests x depend")
}

func TestRewriteRefsReplacesOnlyKnownSecretKeys(t *testing.T) {
	t.Parallel()
	in := `{"host":"h","password":{"secret":"password"},"keys":{"app":{"access_key_id":"AK","secret_access_key":{"secret":"key-app"}}},"other":{"secret":"unknown"}}`
	out, err := rewriteRefs(json.RawMessage(in), map[string]string{"password": "t/i-creds/password@v1", "key-app": "t/i-creds/key-app@v1"})
	require.NoError(t, err)
	require.JSONEq(t, `{"host":"h","password":{"secret":"t/i-creds/password@v1"},"keys":{"app":{"access_key_id":"AK","secret_access_key":{"secret":"t/i-creds/key-app@v1"}}},"other":{"secret":"unknown"}}`, string(out))
}

func TestSecretFileNamesAreDNSSafe(t *testing.T) {
	t.Parallel()
	for _, pointer := range []string{
		"/apps/miniflux/options/metrics/password",
		"/apps/mastodon/options/SMTP_Password",
		"/apps/x/options/9lives",
		"/apps/peertube/options/a-very-long-option-name-that-goes-on-and-on-and-on-and-on-and-on",
	} {
		name := secretFileName(pointer)
		require.True(t, sdk.ValidInstance(name), "%q from %q", name, pointer)
	}
	require.Equal(t, "miniflux-metrics-password", secretFileName("/apps/miniflux/options/metrics/password"))
}

func TestBackupOnly(t *testing.T) {
	t.Parallel()
	require.True(t, backupOnly(`{"buckets":{"backups":{"backup":true}}}`))
	require.False(t, backupOnly(`{"buckets":{"backups":{"backup":true},"media":{}}}`))
	require.False(t, backupOnly(`{"buckets":{}}`))
}

// clear_secret refuses the pointers that keep an import's values, naming the field and
// the pointer, and leaves them stored; an unknown pointer is refused as before.
func TestClearSecretRefusesTheImportPointers(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	e, d := newBackupEngine(t, &clock)
	ctx := context.Background()
	refs := `{"/migration":"secret://acme/fedhost-import/value","/migration-confirm":"secret://acme/fedhost-import-confirm/value"}`
	require.NoError(t, e.opts.Store.UpdateDeployment(ctx, d.ID, map[string]any{"secret_refs": refs, "catalog_revision": "r1"}))
	for _, ptr := range []string{importPointer, importConfirmPointer} {
		_, _, err := e.SubmitWith(ctx, d.ID, json.RawMessage(`{}`), SubmitOptions{ClearSecrets: []string{ptr}})
		var de *Error
		require.True(t, errors.As(err, &de), "%v", err)
		require.Equal(t, CodeInvalidConfiguration, de.Code)
		require.Equal(t, "/clear_secret", de.Location)
		require.Contains(t, de.Message, "clear_secret names "+ptr)
		require.Contains(t, de.Message, "import")
	}
	got, err := e.opts.Store.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	require.JSONEq(t, refs, got.SecretRefs, "the import's references stay")
	_, _, err = e.SubmitWith(ctx, d.ID, json.RawMessage(`{}`), SubmitOptions{ClearSecrets: []string{"/apps/miniflux/options/nothing"}})
	var de *Error
	require.True(t, errors.As(err, &de) && de.Code == CodeInvalidConfiguration && de.Location != "/clear_secret", "%v", err)
}
