package cli_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// fedhost audit verify passes on an untouched trail and fails, naming the event, after
// one row is edited or removed in the database.
func TestAuditVerifyFindsAnEditedOrRemovedEvent(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	env := append(os.Environ(), "FEDHOST_DATA_DIR="+dataDir, "FEDHOST_PLUGIN_DIR="+t.TempDir())
	for _, name := range []string{"alice", "bob", "carol"} {
		out, stderr, code := run(t, env, "users", "create", name)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "user "+name+" created")
	}
	out, stderr, code := run(t, env, "audit", "verify")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "chain intact")

	db, err := sql.Open("sqlite", filepath.Join(dataDir, "fedhost.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE audit_events SET reason = 'edited' WHERE seq = 2`)
	require.NoError(t, err)
	_, stderr, code = run(t, env, "audit", "verify")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "sequence 2")

	_, err = db.Exec(`UPDATE audit_events SET reason = '' WHERE seq = 2`)
	require.NoError(t, err)
	_, stderr, code = run(t, env, "audit", "verify")
	require.Equal(t, 0, code, "the original row verifies again: %s", stderr)

	_, err = db.Exec(`DELETE FROM audit_events WHERE seq = 2`)
	require.NoError(t, err)
	_, stderr, code = run(t, env, "audit", "verify")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "sequence 2")
}
