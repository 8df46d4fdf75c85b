package api

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// User is an operator account as the API shows it.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Superuser bool      `json:"superuser"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

func (h *handlers) listUsers(c *fiber.Ctx) error {
	users, err := h.d.Auth.Users(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]User, 0, len(users))
	for _, u := range users {
		out = append(out, User{ID: u.ID, Name: u.Name, Superuser: u.Superuser, Disabled: u.Disabled, CreatedAt: u.CreatedAt})
	}
	return c.JSON(out)
}

// CreateUserRequest makes an operator account.
type CreateUserRequest struct {
	Name      string `json:"name"`
	Superuser bool   `json:"superuser"`
}

func (h *handlers) createUser(c *fiber.Ctx) error {
	var req CreateUserRequest
	if err := c.BodyParser(&req); err != nil || req.Name == "" {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/name", Message: "a user needs a name"}
	}
	u, password, err := h.d.Auth.CreateUser(c.UserContext(), req.Name, req.Superuser)
	switch {
	case errors.Is(err, store.ErrConflict):
		return &deploy.Error{Code: deploy.CodeConflict, Location: "/name", Message: err.Error()}
	case errors.Is(err, auth.ErrInvalidName):
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/name", Message: err.Error()}
	case err != nil:
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"user":     User{ID: u.ID, Name: u.Name, Superuser: u.Superuser, CreatedAt: u.CreatedAt},
		"password": password,
	})
}

// Job is a build as the jobs page shows it.
type Job struct {
	Build
	DurationMS int64 `json:"duration_ms"`
}

func (h *handlers) listJobs(c *fiber.Ctx) error {
	builds, err := h.d.Store.ListAllBuilds(c.UserContext(), 500)
	if err != nil {
		return err
	}
	out := make([]Job, 0, len(builds))
	for _, b := range builds {
		j := Job{Build: toBuild(b)}
		if b.StartedAt != nil {
			end := time.Now()
			if b.FinishedAt != nil {
				end = *b.FinishedAt
			}
			j.DurationMS = end.Sub(*b.StartedAt).Milliseconds()
		}
		out = append(out, j)
	}
	return c.JSON(out)
}

func (h *handlers) cancelJob(c *fiber.Ctx) error {
	if err := h.d.Engine.Cancel(c.UserContext(), c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusAccepted)
}

func (h *handlers) updatePolicy(c *fiber.Ctx) error {
	var p deploy.UpdatePolicy
	if err := c.BodyParser(&p); err != nil {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: "send {\"policy\": \"manual\" | \"automatic\" | \"window\", ...}"}
	}
	saved, err := h.d.Engine.SetUpdatePolicy(c.UserContext(), c.Params("id"), p)
	if err != nil {
		return err
	}
	return c.JSON(saved)
}
