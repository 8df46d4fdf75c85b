package cli_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// fedhost users takes access away: tokens listed and revoked, accounts disabled,
// demoted and deleted, but never the last active superuser; a reset's password is to
// be changed (issue 18, defect 4; issue 10, item 11).
func TestUsersTakeAccessAway(t *testing.T) {
	t.Parallel()
	env := append(os.Environ(), "FEDHOST_DATA_DIR="+t.TempDir(), "FEDHOST_PLUGIN_DIR="+t.TempDir())
	ok := func(args ...string) string {
		t.Helper()
		out, stderr, code := run(t, env, args...)
		require.Equal(t, 0, code, "fedhost %v: %s", args, stderr)
		return out
	}
	ok("users", "create", "root", "--superuser")
	ok("users", "create", "alice")
	ok("users", "token", "alice", "--name", "feed importer")

	out := ok("users", "tokens", "alice")
	require.Regexp(t, `(?m)^\S+\s+feed importer\s+.*never$`, out)
	require.NotContains(t, out, "fh_")
	id := regexp.MustCompile(`(?m)^(\S+)\s+feed importer`).FindStringSubmatch(out)[1]
	require.Contains(t, ok("users", "revoke-token", id), "is revoked")
	require.NotContains(t, ok("users", "tokens", "alice"), "feed importer")
	_, stderr, code := run(t, env, "users", "revoke-token", id)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no API token with this id")

	require.Contains(t, ok("users", "disable", "alice"), "user alice is disabled")
	require.Regexp(t, `(?m)^alice\s+false\s+true\s+`, ok("users", "list"))
	ok("users", "enable", "alice")

	_, stderr, code = run(t, env, "users", "demote", "root")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "last active superuser")
	_, stderr, code = run(t, env, "users", "delete", "root")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "last active superuser")

	require.Contains(t, ok("users", "reset-password", "alice"), "new password of user alice")
	require.Regexp(t, `(?m)^alice\s+false\s+false\s+true\s+`, ok("users", "list"), "to be changed")
	require.Contains(t, ok("users", "delete", "alice"), "user alice is deleted")
	_, stderr, code = run(t, env, "users", "delete", "alice")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no user "alice"`)
}
