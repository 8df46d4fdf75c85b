package kvtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// call sends one raw request, as the KV v2 API documents it, and decodes the answer.
func call(t *testing.T, s *Server, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("X-Vault-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return resp.StatusCode, out
}

func TestKVv2API(t *testing.T) {
	t.Parallel()
	s := New("secret", map[string]string{"root": "", "scoped": "app/a/"})
	t.Cleanup(s.Close)

	code, body := call(t, s, "GET", "/v1/secret/data/app/a/db", "root", "")
	require.Equal(t, 404, code)
	require.Equal(t, map[string]any{"errors": []any{}}, body)

	code, body = call(t, s, "POST", "/v1/secret/data/app/a/db", "root", `{"options":{"cas":0},"data":{"password":"one"}}`)
	require.Equal(t, 200, code)
	require.EqualValues(t, 1, body["data"].(map[string]any)["version"])

	code, body = call(t, s, "POST", "/v1/secret/data/app/a/db", "root", `{"options":{"cas":0},"data":{"password":"two"}}`)
	require.Equal(t, 400, code, "cas 0 refuses a key that exists")
	require.Equal(t, []any{"check-and-set parameter did not match the current version"}, body["errors"])

	code, _ = call(t, s, "PUT", "/v1/secret/data/app/a/db", "root", `{"options":{"cas":1},"data":{"password":"two"}}`)
	require.Equal(t, 200, code)

	code, body = call(t, s, "GET", "/v1/secret/data/app/a/db", "root", "")
	require.Equal(t, 200, code)
	data := body["data"].(map[string]any)
	require.Equal(t, map[string]any{"password": "two"}, data["data"])
	require.EqualValues(t, 2, data["metadata"].(map[string]any)["version"])

	_, body = call(t, s, "GET", "/v1/secret/data/app/a/db?version=1", "root", "")
	require.Equal(t, map[string]any{"password": "one"}, body["data"].(map[string]any)["data"])
	code, _ = call(t, s, "GET", "/v1/secret/data/app/a/db?version=3", "root", "")
	require.Equal(t, 404, code)

	_, body = call(t, s, "GET", "/v1/secret/metadata/app/a/db", "root", "")
	require.EqualValues(t, 2, body["data"].(map[string]any)["current_version"])

	call(t, s, "POST", "/v1/secret/data/app/b/db", "root", `{"data":{"password":"b"}}`)
	for _, req := range [][2]string{{"LIST", "/v1/secret/metadata/app"}, {"GET", "/v1/secret/metadata/app/?list=true"}} {
		code, body = call(t, s, req[0], req[1], "root", "")
		require.Equal(t, 200, code, req)
		require.Equal(t, []any{"a/", "b/"}, body["data"].(map[string]any)["keys"], req)
	}
	code, _ = call(t, s, "LIST", "/v1/secret/metadata/nothing", "root", "")
	require.Equal(t, 404, code)

	code, body = call(t, s, "GET", "/v1/secret/data/app/b/db", "scoped", "")
	require.Equal(t, 403, code, "a token scoped to app/a/ cannot read app/b/")
	require.Equal(t, []any{"1 error occurred:\n\t* permission denied\n\n"}, body["errors"], "a policy gap is OpenBao's multierror")
	code, body = call(t, s, "GET", "/v1/secret/data/app/a/db", "wrong", "")
	require.Equal(t, 403, code)
	require.Equal(t, []any{"permission denied"}, body["errors"], "an unknown token is the bare refusal")
	code, _ = call(t, s, "GET", "/v1/secret/data/app/a/db", "scoped", "")
	require.Equal(t, 200, code)

	code, _ = call(t, s, "DELETE", "/v1/secret/metadata/app/a/db", "root", "")
	require.Equal(t, 204, code)
	code, _ = call(t, s, "GET", "/v1/secret/data/app/a/db?version=1", "root", "")
	require.Equal(t, 404, code, "deleting the metadata deletes every version")
	require.Equal(t, []string{"app/b/db"}, s.Keys())
}

func TestKeepsTenVersions(t *testing.T) {
	t.Parallel()
	s := New("secret", map[string]string{"root": ""})
	t.Cleanup(s.Close)
	for i := 0; i < 12; i++ {
		code, _ := call(t, s, "POST", "/v1/secret/data/k", "root", `{"data":{"n":"x"}}`)
		require.Equal(t, 200, code)
	}
	code, _ := call(t, s, "GET", "/v1/secret/data/k?version=2", "root", "")
	require.Equal(t, 404, code)
	code, _ = call(t, s, "GET", "/v1/secret/data/k?version=3", "root", "")
	require.Equal(t, 200, code)
	_, body := call(t, s, "GET", "/v1/secret/metadata/k", "root", "")
	require.EqualValues(t, 3, body["data"].(map[string]any)["oldest_version"])
}

func TestPoliciesAndTokenLookup(t *testing.T) {
	t.Parallel()
	s := New("secret", map[string]string{"root": ""})
	t.Cleanup(s.Close)
	s.Grant("app", "app/", Read, List)
	s.Grant("app", "app/own/", Create, Read, Update, Delete, List)
	denied := []any{"1 error occurred:\n\t* permission denied\n\n"}

	code, body := call(t, s, "POST", "/v1/secret/data/app/shared", "app", `{"data":{"v":"x"}}`)
	require.Equal(t, 403, code, "create needs the capability")
	require.Equal(t, denied, body["errors"])
	code, _ = call(t, s, "POST", "/v1/secret/data/app/own/k", "app", `{"data":{"v":"x"}}`)
	require.Equal(t, 200, code, "the longer prefix grants create")
	code, _ = call(t, s, "POST", "/v1/secret/data/app/shared", "root", `{"data":{"v":"x"}}`)
	require.Equal(t, 200, code)
	code, _ = call(t, s, "GET", "/v1/secret/data/app/shared", "app", "")
	require.Equal(t, 200, code)
	code, body = call(t, s, "PUT", "/v1/secret/data/app/shared", "app", `{"data":{"v":"y"}}`)
	require.Equal(t, 403, code, "a write to a key that exists needs update")
	require.Equal(t, denied, body["errors"])
	code, _ = call(t, s, "DELETE", "/v1/secret/metadata/app/shared", "app", "")
	require.Equal(t, 403, code)
	code, _ = call(t, s, "DELETE", "/v1/secret/metadata/app/own/k", "app", "")
	require.Equal(t, 204, code)

	code, body = call(t, s, "GET", "/v1/auth/token/lookup-self", "app", "")
	require.Equal(t, 200, code, "the default policy lets a token look itself up")
	require.Equal(t, "app", body["data"].(map[string]any)["id"])
	s.Revoke("app")
	for _, path := range []string{"/v1/auth/token/lookup-self", "/v1/secret/data/app/shared"} {
		code, body = call(t, s, "GET", path, "app", "")
		require.Equal(t, 403, code, path)
		require.Equal(t, []any{"permission denied"}, body["errors"], path)
	}
	s.AnswerLikeVault()
	_, body = call(t, s, "GET", "/v1/auth/token/lookup-self", "app", "")
	require.Equal(t, []any{"2 errors occurred:\n\t* permission denied\n\t* invalid token\n\n"}, body["errors"])
}
