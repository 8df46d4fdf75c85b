package input_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/input"
)

func TestText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "Acme news", "Café ☕ 日本", strings.Repeat("a", 128)} {
		require.NoError(t, input.Text("name", s, 128), "%q", s)
	}
	for _, s := range []string{
		strings.Repeat("a", 129), "a\x00b", "tab\there", "new\nline", "del\x7f", "c1\u0085",
		"\u202eevil", "\u202aembed", "\u2066isolate", "\u2069", "bad \xff utf-8",
	} {
		err := input.Text("name", s, 128)
		require.Error(t, err, "%q", s)
		require.True(t, strings.HasPrefix(err.Error(), "name: "), err.Error())
		require.NotContains(t, err.Error(), s, "the error does not echo the value")
	}
}
