package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/contract"
)

// A node spec no process could be started with is refused, naming what is too large.
func TestCheckNodeBoundsWhatANodeIsGiven(t *testing.T) {
	t.Parallel()
	spec := func(n contract.InstanceRequest) json.RawMessage {
		raw, err := json.Marshal(n)
		require.NoError(t, err)
		return raw
	}
	fine := contract.InstanceRequest{Artifact: contract.Artifact{Binary: "miniflux"}, Args: []string{"-c", "x"},
		Env: map[string]string{"METRICS_ALLOWED_NETWORKS": strings.Repeat("10.0.0.0/8,", 64)}, Files: map[string]contract.InstanceFile{"config": {Content: "x"}}}
	require.NoError(t, checkNode(spec(fine)))

	// 15,000 networks, as the review tried: over what one variable may hold.
	networks := strings.TrimSuffix(strings.Repeat("192.168.100.0/24,", 15000), ",")
	for _, tc := range []struct {
		n    contract.InstanceRequest
		want string
	}{
		{contract.InstanceRequest{Env: map[string]string{"METRICS_ALLOWED_NETWORKS": networks}}, "environment variable METRICS_ALLOWED_NETWORKS is"},
		{contract.InstanceRequest{Env: map[string]string{"A": strings.Repeat("a", 60<<10), "B": strings.Repeat("b", 60<<10), "C": strings.Repeat("c", 60<<10),
			"D": strings.Repeat("d", 60<<10), "E": strings.Repeat("e", 60<<10), "F": strings.Repeat("f", 60<<10), "G": strings.Repeat("g", 60<<10),
			"H": strings.Repeat("h", 60<<10), "I": strings.Repeat("i", 60<<10)}}, "its environment totals"},
		{contract.InstanceRequest{Args: []string{networks}}, "an argument is"},
		{contract.InstanceRequest{Files: map[string]contract.InstanceFile{"big": {Content: strings.Repeat("x", 2<<20)}}}, "file big is"},
	} {
		require.ErrorContains(t, checkNode(spec(tc.n)), tc.want)
	}
	many := make([]string, 9000)
	for i := range many {
		many[i] = strings.Repeat("a", 63)
	}
	require.ErrorContains(t, checkNode(spec(contract.InstanceRequest{Args: many})), "its arguments total")
}

// A configuration larger than any app needs is refused before the catalog is asked.
func TestValidateBoundsTheConfiguration(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`{"domain":"acme.example.org","padding":"` + strings.Repeat("x", 300<<10) + `"}`)
	_, _, _, err := (&Engine{}).validate(context.Background(), raw, "", nil, nil)
	var de *Error
	require.True(t, errors.As(err, &de), "%v", err)
	require.Equal(t, CodeInvalidConfiguration, de.Code)
	require.Contains(t, de.Message, "larger than 256 KiB")
}
