package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:4E21 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
`

func TestListeningPortsReadsOnlyListeners(t *testing.T) {
	require.Equal(t, map[int]bool{8080: true, 20001: true}, listeningPorts(procNetTCP))
}

func FuzzListeningPorts(f *testing.F) {
	f.Add(procNetTCP)
	f.Add("0: 0100007F: x 0A")
	f.Fuzz(func(t *testing.T, s string) {
		for port := range listeningPorts(s) {
			if port < 0 || port > 65535 {
				t.Fatalf("port %d out of range", port)
			}
		}
	})
}

func TestPlacementIsStableAndSpreads(t *testing.T) {
	cfg := settings{Machines: []*machine{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	seen := map[string]bool{}
	for _, inst := range []string{"web", "worker", "db", "cache", "search", "mail"} {
		m := cfg.place("t1", inst)
		require.Same(t, m, cfg.place("t1", inst))
		seen[m.Name] = true
	}
	require.Greater(t, len(seen), 1, "six instances all went to one machine of three")
}

func TestShellQuoting(t *testing.T) {
	require.Equal(t, `'it'\''s'`, shq("it's"))
	require.Equal(t, "ab\ncd\nef", wrap("abcdef", 2))
	require.True(t, strings.HasPrefix(mustDelim(t), "FEDHOST_EOF_"))
}

func mustDelim(t *testing.T) string {
	d, err := randomDelimiter()
	require.NoError(t, err)
	return d
}
