package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpguts"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/host/tfstate"
	"github.com/fedhost/fedhost/internal/storetest"
)

type stateBackend struct {
	app  *fiber.App
	st   *store.Store
	keys *tfstate.Keys
}

func setupStateBackend(t *testing.T) stateBackend {
	t.Helper()
	dir := t.TempDir()
	st := storetest.Open(t, store.Config{Database: "sqlite", DataDir: dir})
	keys, err := tfstate.LoadOrCreate(dir)
	require.NoError(t, err)
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Store: st, TerraformState: keys})
	return stateBackend{app: app, st: st, keys: keys}
}

// call sends method to the state of tenant/instance with token as the Basic password
// ("" sends none) and returns the status and body.
func (b stateBackend) call(t *testing.T, method, workspace, query, token, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "/api/v1/terraform/state/"+workspace+query, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("fedhost:"+token)))
	}
	resp, err := b.app.Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

func (b stateBackend) token(tenant, instance string) string {
	return tfstate.Token(b.keys.StateKey(), tenant, instance)
}

// A workspace opens only with its own token: none is 401, a wrong one or another
// workspace's is 403, for every method.
func TestTerraformStateNeedsTheWorkspacesToken(t *testing.T) {
	t.Parallel()
	b := setupStateBackend(t)
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete, api.MethodLock, api.MethodUnlock} {
		status, _ := b.call(t, method, "acme/db", "", "", `{"ID":"x"}`)
		require.Equal(t, http.StatusUnauthorized, status, method)
		for _, wrong := range []string{b.token("acme", "cache"), b.token("beta", "db"), b.token("acmed", "b"), strings.Repeat("0", 64)} {
			status, body := b.call(t, method, "acme/db", "", wrong, `{"ID":"x"}`)
			require.Equal(t, http.StatusForbidden, status, method)
			require.Contains(t, body, "authz_denied")
		}
	}
	status, _ := b.call(t, http.MethodGet, "acme/db", "", b.token("acme", "db"), "")
	require.Equal(t, http.StatusNoContent, status, "no state yet")
	status, _ = b.call(t, http.MethodGet, "Acme/db", "", b.token("Acme", "db"), "")
	require.Equal(t, http.StatusBadRequest, status, "not a workspace name")
}

// A state written is read back as written and is stored sealed; the lock follows
// Terraform's http backend: 423 with the holder's info when held, writes and unlocks
// with another ID 409, an unlock without an ID (force-unlock) releases it.
func TestTerraformStateLockAndWrite(t *testing.T) {
	t.Parallel()
	b := setupStateBackend(t)
	tok := b.token("acme", "db")
	const state = `{"version":4,"serial":1,"outputs":{"password":{"value":"plain-marker-7f3a","type":"string","sensitive":true}}}`
	status, _ := b.call(t, http.MethodPost, "acme/db", "", tok, state)
	require.Equal(t, http.StatusOK, status)
	status, body := b.call(t, http.MethodGet, "acme/db", "", tok, "")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, state, body)
	row, err := b.st.TerraformStateOf(context.Background(), "acme", "db")
	require.NoError(t, err)
	require.NotContains(t, row.Sealed, "plain-marker")
	raw, err := base64.StdEncoding.DecodeString(row.Sealed)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "plain-marker", "sealed at rest")
	status, _ = b.call(t, http.MethodGet, "acme/cache", "", b.token("acme", "cache"), "")
	require.Equal(t, http.StatusNoContent, status, "another workspace has its own state")

	lockA := `{"ID":"a1","Operation":"OperationTypeApply","Who":"run@a","Created":"2026-12-02T01:00:00Z"}`
	status, _ = b.call(t, api.MethodLock, "acme/db", "", tok, lockA)
	require.Equal(t, http.StatusOK, status)
	status, body = b.call(t, api.MethodLock, "acme/db", "", tok, `{"ID":"b2"}`)
	require.Equal(t, http.StatusLocked, status)
	require.JSONEq(t, lockA, body, "the holder's lock info")
	status, body = b.call(t, http.MethodPost, "acme/db", "", tok, `{"version":4,"serial":2}`)
	require.Equal(t, http.StatusConflict, status, "a write without the lock's ID")
	require.JSONEq(t, lockA, body)
	status, _ = b.call(t, http.MethodPost, "acme/db", "?ID=b2", tok, `{"version":4,"serial":2}`)
	require.Equal(t, http.StatusConflict, status, "a write with another lock's ID")
	status, _ = b.call(t, http.MethodPost, "acme/db", "?ID=a1", tok, `{"version":4,"serial":2}`)
	require.Equal(t, http.StatusOK, status)
	status, _ = b.call(t, http.MethodDelete, "acme/db", "", tok, "")
	require.Equal(t, http.StatusConflict, status, "a delete while locked")
	status, _ = b.call(t, api.MethodUnlock, "acme/db", "", tok, `{"ID":"b2"}`)
	require.Equal(t, http.StatusConflict, status, "another lock's unlock")
	status, _ = b.call(t, api.MethodUnlock, "acme/db", "", tok, lockA)
	require.Equal(t, http.StatusOK, status)
	status, _ = b.call(t, api.MethodUnlock, "acme/db", "", tok, lockA)
	require.Equal(t, http.StatusOK, status, "unlocking what is unlocked")

	status, _ = b.call(t, api.MethodLock, "acme/db", "", tok, `{"ID":"c3"}`)
	require.Equal(t, http.StatusOK, status)
	status, _ = b.call(t, api.MethodUnlock, "acme/db", "", tok, "")
	require.Equal(t, http.StatusOK, status, "force-unlock")
	status, _ = b.call(t, api.MethodLock, "acme/db", "", tok, `{"ID":"d4"}`)
	require.Equal(t, http.StatusOK, status, "the forced lock is gone")
	status, _ = b.call(t, api.MethodUnlock, "acme/db", "", tok, `{"ID":"d4"}`)
	require.Equal(t, http.StatusOK, status)

	status, _ = b.call(t, api.MethodLock, "acme/db", "", tok, `{"Who":"no id"}`)
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = b.call(t, http.MethodPost, "acme/db", "", tok, `not json`)
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = b.call(t, http.MethodDelete, "acme/db", "", tok, "")
	require.Equal(t, http.StatusOK, status)
	status, _ = b.call(t, http.MethodGet, "acme/db", "", tok, "")
	require.Equal(t, http.StatusNoContent, status, "deleted")
}

// FuzzTerraformState sends any method, query, body and Authorization to a workspace's
// state: the answer is never a 500, and a refusal is the API's JSON error.
func FuzzTerraformState(f *testing.F) {
	dir := f.TempDir()
	st, err := store.Open(context.Background(), store.Config{Database: "sqlite", DataDir: dir})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	keys, err := tfstate.LoadOrCreate(dir)
	if err != nil {
		f.Fatal(err)
	}
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Store: st, TerraformState: keys})
	good := "Basic " + base64.StdEncoding.EncodeToString([]byte("fedhost:"+tfstate.Token(keys.StateKey(), "acme", "db")))
	methods := []string{http.MethodGet, http.MethodPost, http.MethodDelete, api.MethodLock, api.MethodUnlock}
	f.Add(uint8(3), true, "", `{"ID":"a"}`, "")
	f.Add(uint8(1), true, "?ID=a", `{"version":4}`, "")
	f.Add(uint8(4), false, "", `{"ID":"a"}`, "Basic !!!")
	f.Fuzz(func(t *testing.T, method uint8, signed bool, query, body, authorization string) {
		req := httptest.NewRequest(methods[int(method)%len(methods)], "/api/v1/terraform/state/acme/db", strings.NewReader(body))
		if u, err := url.ParseQuery(strings.TrimPrefix(query, "?")); err == nil {
			req.URL.RawQuery = u.Encode()
		}
		req.Header.Set("Content-Type", "application/json")
		if signed {
			authorization = good
		}
		if !httpguts.ValidHeaderFieldValue(authorization) {
			t.Skip("not a header an HTTP client sends")
		}
		req.Header.Set("Authorization", authorization)
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("%d: %s", resp.StatusCode, out)
		}
		if resp.StatusCode >= 400 && resp.StatusCode != http.StatusLocked && resp.StatusCode != http.StatusConflict {
			var e struct {
				Error api.Error `json:"error"`
			}
			if json.Unmarshal(out, &e) != nil || e.Error.Code == "" {
				t.Fatalf("%d is not the API's error: %s", resp.StatusCode, out)
			}
		}
	})
}
