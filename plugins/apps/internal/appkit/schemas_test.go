package appkit_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every string and array option of every app is bounded, so that no configuration the
// host accepts is one the app cannot run (an environment over the kernel's limits).
func TestAppSchemasBoundTheirOptions(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../*/schema.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var schema any
		require.NoError(t, json.Unmarshal(raw, &schema), f)
		var unbounded []string
		var walk func(node any, at string)
		walk = func(node any, at string) {
			switch n := node.(type) {
			case map[string]any:
				_, enum := n["enum"]
				_, maxLength := n["maxLength"]
				_, maxItems := n["maxItems"]
				switch {
				case n["type"] == "string" && !enum && !maxLength:
					unbounded = append(unbounded, at+" (maxLength)")
				case n["type"] == "array" && !maxItems:
					unbounded = append(unbounded, at+" (maxItems)")
				}
				for k, v := range n {
					walk(v, at+"/"+k)
				}
			case []any:
				for i, v := range n {
					walk(v, fmt.Sprintf("%s/%d", at, i))
				}
			}
		}
		walk(schema, "")
		require.Empty(t, unbounded, "%s: options without a bound", f)
	}
}
