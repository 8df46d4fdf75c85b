package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
)

// The client ID names the data directory, stays the same for the same directory, and
// stays within River's limit on leader IDs however long the path is.
func TestClientIDIsStableAndShortEnough(t *testing.T) {
	short := &config.Config{DataDir: "/srv/fedhost/data"}
	require.True(t, strings.HasSuffix(clientID(short), ":/srv/fedhost/data"))
	require.Equal(t, clientID(short), clientID(&config.Config{DataDir: "/srv/fedhost/data"}))

	long := &config.Config{DataDir: "/srv/" + strings.Repeat("a-very-long-directory-name/", 10) + "data"}
	other := &config.Config{DataDir: "/srv/" + strings.Repeat("a-very-long-directory-name/", 10) + "data2"}
	require.Less(t, len(clientID(long)), 128)
	require.Equal(t, clientID(long), clientID(&config.Config{DataDir: long.DataDir}))
	require.NotEqual(t, clientID(long), clientID(other), "two directories, two IDs")
}
