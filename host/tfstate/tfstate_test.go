package tfstate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The key is made once and kept; a key file others may read is refused; a state sealed
// opens with the same key only; each workspace has a token of its own.
func TestKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, err := LoadOrCreate(dir)
	require.NoError(t, err)
	again, err := LoadOrCreate(dir)
	require.NoError(t, err)
	require.Equal(t, k.StateKey(), again.StateKey())
	info, err := os.Stat(filepath.Join(dir, KeyFileName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	sealed, err := k.Seal([]byte(`{"serial":1}`))
	require.NoError(t, err)
	state, err := again.Open(sealed)
	require.NoError(t, err)
	require.Equal(t, `{"serial":1}`, string(state))
	other, err := LoadOrCreate(t.TempDir())
	require.NoError(t, err)
	_, err = other.Open(sealed)
	require.ErrorContains(t, err, KeyFileName)
	require.NotEqual(t, k.StateKey(), other.StateKey())

	tok := Token(k.StateKey(), "acme", "db")
	require.True(t, k.Opens(tok, "acme", "db"))
	require.False(t, k.Opens(tok, "acme", "cache"))
	require.False(t, k.Opens(tok, "beta", "db"))
	require.False(t, other.Opens(tok, "acme", "db"))

	require.NoError(t, os.Chmod(filepath.Join(dir, KeyFileName), 0o644))
	_, err = LoadOrCreate(dir)
	require.ErrorContains(t, err, "chmod 600")
}
