package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/plugins"
)

// setup returns the API over a plugin manager of an empty plugin directory and no engine.
func setup(t *testing.T) *fiber.App {
	t.Helper()
	m, err := plugins.New(plugins.Options{Dir: t.TempDir(), DataDir: t.TempDir()})
	require.NoError(t, err)
	return api.New(api.Deps{Plugins: m, Version: "1.2.3"})
}

func get(t *testing.T, app *fiber.App, path string) (status int, contentType string, body []byte) {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, path, nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	status, _, body := get(t, setup(t), "/healthz")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"status": "ok", "version": "1.2.3"}`, string(body))
}

func TestPluginsOfEmptyDirIsEmptyList(t *testing.T) {
	t.Parallel()
	status, contentType, body := get(t, setup(t), "/api/v1/plugins")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, contentType, "application/json")
	require.JSONEq(t, `[]`, string(body), "an empty list, not null")
}

func TestUnknownRouteIsNotFoundError(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/api/v1/nothing-here", "/nothing-here"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			status, contentType, body := get(t, setup(t), path)
			require.Equal(t, http.StatusNotFound, status)
			require.Contains(t, contentType, "application/json")
			var answer struct {
				Error *api.Error `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &answer), "%s", body)
			require.NotNil(t, answer.Error, "%s", body)
			require.Equal(t, "not_found", answer.Error.Code)
			require.NotEmpty(t, answer.Error.Message)
			require.Contains(t, answer.Error.Message, path)
		})
	}
}
