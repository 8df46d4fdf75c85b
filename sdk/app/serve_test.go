package app

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestSecretInputsGoOnStdinOnly(t *testing.T) {
	t.Parallel()
	op := Operation{Name: "create-user", Input: json.RawMessage(`{"type": "object", "properties": {
		"username": {"type": "string"}, "password": {"type": "string", "writeOnly": true}}}`)}
	input := json.RawMessage(`{"username": "bob", "password": "pass-of-bob"}`)
	require.Equal(t, map[string]string{"password": "pass-of-bob"}, SecretInputs(op.Input, input))

	require.NoError(t, checkSecretsOnStdin(op, input, Command{Args: []string{"-user", "bob"}, Stdin: []byte("pass-of-bob\n")}))
	err := checkSecretsOnStdin(op, input, Command{Args: []string{"-password=pass-of-bob"}})
	require.Equal(t, sdk.CodeInternal, sdk.CodeOf(err))
	require.NotContains(t, err.Error(), "pass-of-bob")
	err = checkSecretsOnStdin(op, input, Command{Env: map[string]string{"PASSWORD": "pass-of-bob"}})
	require.ErrorContains(t, err, "env PASSWORD")
	require.NotContains(t, err.Error(), "pass-of-bob")
}
