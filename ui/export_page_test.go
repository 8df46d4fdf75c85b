package ui

import (
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// The export's result shows the migration string and, when public_url is not set, the
// warning that its source URL is the page's own address; with public_url set, no warning.
func TestExportResultShowsThePublicURLWarning(t *testing.T) {
	t.Parallel()
	u := New(Deps{Version: "test"})
	app := fiber.New()
	warning := ""
	app.Get("/", func(c *fiber.Ctx) error {
		data := exportData{D: store.Deployment{ID: "d1", Name: "acme"}, Migration: "fedhost-migration-1:abc", ExpiresAt: time.Now(), BuildID: "b1", Warning: warning}
		return u.render(c, fiber.StatusOK, "export", u.view(nil, "Exported acme", "deployments", data))
	})
	page := func() string {
		resp, err := app.Test(httptest.NewRequest("GET", "/", nil))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, fiber.StatusOK, resp.StatusCode, "%s", body)
		return string(body)
	}
	body := page()
	require.Contains(t, body, "fedhost-migration-1:abc")
	require.NotContains(t, body, "public_url")

	warning = deploy.PublicURLWarning
	body = page()
	require.Contains(t, body, "fedhost-migration-1:abc")
	require.Contains(t, body, "public_url is not set")
}
