package api

import (
	"encoding/json"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/limiter"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// ExportRequest asks for an export to another fedhost: its recipient, or its URL, where
// the source asks for the recipient.
type ExportRequest struct {
	Recipient string `json:"recipient,omitempty"`
	Target    string `json:"target,omitempty"`
}

// ExportAnswer carries the migration string, answered once and kept nowhere.
type ExportAnswer struct {
	ID        string    `json:"id"`
	Build     string    `json:"build"`
	ExpiresAt time.Time `json:"expires_at"`
	Migration string    `json:"migration"`
	// Warning says what to check when the source URL came from the request's address.
	Warning string `json:"warning,omitempty"`
}

// ConfirmRequest is a target's word that an import is done.
type ConfirmRequest struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// ConfirmAnswer is the export after a confirmation: confirmed (200), or confirming (202)
// while its keys are being revoked.
type ConfirmAnswer struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

func (h *handlers) exportRoutes(r fiber.Router) {
	h.route(r, fiber.MethodPost, "/deployments/:id/export", Owner, "deployment.export", h.export)
	r.Use("/migration/confirm", confirmLimit())
	h.route(r, fiber.MethodPost, "/migration/confirm", Public, "migration.confirm", h.confirmExport)
}

func (h *handlers) export(c *fiber.Ctx) error {
	var body ExportRequest
	if err := json.Unmarshal(c.Body(), &body); err != nil || (body.Recipient == "") == (body.Target == "") {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: `send {"target": "https://..."} (the target fedhost's URL) or {"recipient": "age1pq1..."}`}
	}
	ctx := c.UserContext()
	recipient := body.Recipient
	if body.Target != "" {
		var err error
		if recipient, err = deploy.FetchRecipient(ctx, body.Target); err != nil {
			return err
		}
	}
	base, set := h.d.publicBase(c)
	x, err := h.d.Engine.Export(ctx, c.Params("id"), recipient, base)
	if x.Build.ID != "" {
		c.Locals("build", x.Build.ID)
	}
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	answer := ExportAnswer{ID: x.ExportID, Build: x.Build.ID, ExpiresAt: x.ExpiresAt, Migration: x.String}
	if !set {
		answer.Warning = deploy.PublicURLWarning
	}
	return c.JSON(answer)
}

// confirmExport revokes an export's read-only keys. It is public: the token is the
// credential, compared by its digest, and the route's rate limit bounds guessing.
func (h *handlers) confirmExport(c *fiber.Ctx) error {
	var body ConfirmRequest
	if err := json.Unmarshal(c.Body(), &body); err != nil || body.ID == "" || body.Token == "" {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: `send {"id": ..., "token": ...} from the migration string`}
	}
	x, err := h.d.Engine.ConfirmExport(c.UserContext(), body.ID, body.Token)
	if err != nil {
		return err
	}
	c.Locals("deployment", x.DeploymentID)
	if x.State == store.ExportConfirming {
		// The confirmation is recorded; its revoke-export build has not finished yet.
		return c.Status(fiber.StatusAccepted).JSON(ConfirmAnswer{ID: x.ID, State: x.State,
			Message: "the confirmation is recorded; the read-only keys are revoked by a build of the exported deployment, tried again until it succeeds"})
	}
	return c.JSON(ConfirmAnswer{ID: x.ID, State: x.State})
}

// confirmLimit throttles confirmations by address, as log-ins and password links are.
func confirmLimit() fiber.Handler {
	return limiter.New(limiter.Config{Max: 10, Expiration: time.Minute, LimitReached: func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderRetryAfter, "60")
		return &refused{status: fiber.StatusTooManyRequests, code: "rate_limited", message: "too many tries from this address: wait a minute and try again"}
	}})
}
