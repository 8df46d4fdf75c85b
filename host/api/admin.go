package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// User is an operator account as the API shows it.
type User struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Superuser bool   `json:"superuser"`
	Disabled  bool   `json:"disabled"`
	// MustChangePassword: the account's password was generated (first start, reset) and
	// is to be changed at its next sign-in.
	MustChangePassword bool      `json:"must_change_password"`
	CreatedAt          time.Time `json:"created_at"`
}

func userOf(u auth.User) User {
	return User{ID: u.ID, Name: u.Name, Superuser: u.Superuser, Disabled: u.Disabled, MustChangePassword: u.MustChangePassword, CreatedAt: u.CreatedAt}
}

func (h *handlers) listUsers(c *fiber.Ctx) error {
	users, err := h.d.Auth.Users(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]User, 0, len(users))
	for _, u := range users {
		out = append(out, userOf(u))
	}
	return c.JSON(out)
}

// namedUser returns the account the route names; an unknown name is not_found.
func (h *handlers) namedUser(c *fiber.Ctx) (auth.User, error) {
	u, err := h.d.Auth.UserNamed(c.UserContext(), c.Params("name"))
	if errors.Is(err, store.ErrNotFound) {
		return auth.User{}, &deploy.Error{Code: deploy.CodeNotFound, Message: "no such user: see GET /api/v1/users"}
	}
	return u, err
}

func (h *handlers) userTokens(c *fiber.Ctx) error {
	u, err := h.namedUser(c)
	if err != nil {
		return err
	}
	return h.tokensOf(c, u.ID)
}

// accountChange answers a change of the account the route names, made by change, with
// what change returns, or 204 for nil. self refuses the change on the caller's own
// account, where it would lock the caller out.
func (h *handlers) accountChange(action string, self bool, change func(c *fiber.Ctx, name string) (any, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		u, err := h.namedUser(c)
		if err != nil {
			return err
		}
		cl, _ := callerOf(c)
		var answer any
		if self && u.ID == cl.user.ID {
			err = h.d.Auth.Refuse(c.UserContext(), action, u.Name, auth.ErrSelf)
		} else {
			answer, err = change(c, u.Name)
		}
		var owns *store.OwnsDeploymentsError
		switch {
		case errors.Is(err, auth.ErrSelf):
			return &deploy.Error{Code: deploy.CodeConflict, Message: auth.ErrSelf.Error()}
		case errors.Is(err, store.ErrLastSuperuser):
			return &deploy.Error{Code: deploy.CodeConflict, Message: "this is the last active superuser: make another superuser first, so that somebody can still manage the accounts"}
		case errors.As(err, &owns):
			return &deploy.Error{Code: deploy.CodeConflict, Message: fmt.Sprintf("the user owns %d deployments that are not destroyed: destroy them, or ask their owner to, first", owns.Count)}
		case err != nil:
			return err
		}
		if answer != nil {
			return c.JSON(answer)
		}
		return c.SendStatus(fiber.StatusNoContent)
	}
}

func (h *handlers) setDisabled(disabled bool) func(*fiber.Ctx, string) (any, error) {
	return func(c *fiber.Ctx, name string) (any, error) {
		return nil, h.d.Auth.SetDisabled(c.UserContext(), name, disabled)
	}
}

func (h *handlers) promote(c *fiber.Ctx, name string) (any, error) {
	return nil, h.d.Auth.Promote(c.UserContext(), name)
}

func (h *handlers) demote(c *fiber.Ctx, name string) (any, error) {
	return nil, h.d.Auth.Demote(c.UserContext(), name)
}

func (h *handlers) deleteUser(c *fiber.Ctx, name string) (any, error) {
	return nil, h.d.Auth.DeleteUser(c.UserContext(), name)
}

// PasswordAnswer shows a generated password once.
type PasswordAnswer struct {
	Password string `json:"password"`
}

func (h *handlers) resetPassword(c *fiber.Ctx, name string) (any, error) {
	password, err := h.d.Auth.ResetPassword(c.UserContext(), name)
	if err != nil {
		return nil, err
	}
	return PasswordAnswer{Password: password}, nil
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
		return &deploy.Error{Code: deploy.CodeConflict, Message: err.Error()}
	case errors.Is(err, auth.ErrInvalidName):
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/name", Message: err.Error()}
	case err != nil:
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"user":     userOf(u),
		"password": password,
	})
}

// Job is a build as the jobs page shows it.
type Job struct {
	Build
	DurationMS int64 `json:"duration_ms"`
}

func (h *handlers) listJobs(c *fiber.Ctx) error {
	limit, err := queryInt(c, "limit", maxPage, 1, maxPage)
	if err != nil {
		return err
	}
	builds, err := h.d.Store.ListBuildsBefore(c.UserContext(), c.Query("before"), limit)
	if err != nil {
		return err
	}
	if len(builds) == limit {
		c.Set(NextPageHeader, builds[len(builds)-1].ID)
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
