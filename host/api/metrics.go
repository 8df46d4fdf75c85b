package api

import (
	"crypto/subtle"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/headers"
)

// metricsGuard lets a scrape through: with token "", a request whose peer, the
// connection's own address (no proxy header counts), is loopback; otherwise one that
// sends Authorization: Bearer token, compared in constant time.
func metricsGuard(token string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if token == "" {
			if !c.Context().RemoteIP().IsLoopback() {
				return &refused{status: fiber.StatusForbidden, code: "metrics_loopback_only",
					message: "metrics are served to this machine only: scrape from it, or have the provider set metrics = \"token\""}
			}
			return c.Next()
		}
		sent, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
		if !ok || sent == "" {
			return &refused{status: fiber.StatusUnauthorized, code: "unauthenticated",
				message: "metrics need Authorization: Bearer with the token of metrics_token_file"}
		}
		if subtle.ConstantTimeCompare([]byte(sent), []byte(token)) != 1 {
			return &refused{status: fiber.StatusForbidden, code: "authz_denied",
				message: "this is not the metrics token: send the contents of metrics_token_file"}
		}
		return c.Next()
	}
}

// mountMetrics serves GET /metrics when d.Metrics is set.
func mountMetrics(app *fiber.App, d Deps) {
	if d.Metrics == nil {
		return
	}
	app.Get("/metrics", headers.Middleware(headers.DataCSP), metricsGuard(d.MetricsToken), d.Metrics.Handler())
}
