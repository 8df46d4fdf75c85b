package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A write replaces the file whole, with the mode asked for, and leaves no temporary file.
func TestWriteReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.conf")
	require.NoError(t, Write(path, []byte("old"), 0o600))
	require.NoError(t, Write(path, []byte("new content"), 0o640))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new content", string(b))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")

	err = Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600)
	require.ErrorContains(t, err, "writing ")
}
