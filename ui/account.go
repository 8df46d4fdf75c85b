package ui

import (
	"context"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/store"
)

// ownEventsShown bounds the account page's audit history.
const ownEventsShown = 50

type accountData struct {
	Events []store.AuditEvent
	// Token is the value of a token just created, shown once.
	Token, TokenName, TokenError string
	TokenExpires                 time.Time
}

func (u *UI) account(c *fiber.Ctx, s *session) error {
	return u.showAccount(c, s, fiber.StatusOK, accountData{})
}

func (u *UI) showAccount(c *fiber.Ctx, s *session, status int, data accountData) error {
	events, err := u.ownEvents(s.ctx, s.ID)
	if err != nil {
		return err
	}
	data.Events = events
	return u.render(c, status, "account", u.view(s, "Account", "account", data))
}

// ownEvents returns the newest audit events by or about user, newest first.
func (u *UI) ownEvents(ctx context.Context, user string) ([]store.AuditEvent, error) {
	return u.d.Store.UserAuditEvents(ctx, user, ownEventsShown)
}

func (u *UI) createToken(c *fiber.Ctx, s *session) error {
	name := c.FormValue("name")
	days, err := strconv.Atoi(c.FormValue("lifetime_days"))
	if err != nil || days < 1 || days > 365 {
		return u.showAccount(c, s, fiber.StatusBadRequest, accountData{TokenName: name,
			TokenError: "Give the token's lifetime as a whole number of days, 1 to 365."})
	}
	value, t, err := u.d.Auth.NewToken(s.ctx, s.ID, name, time.Duration(days)*24*time.Hour)
	if err != nil {
		return u.showAccount(c, s, fiber.StatusBadRequest, accountData{TokenName: name, TokenError: err.Error()})
	}
	return u.showAccount(c, s, fiber.StatusCreated, accountData{Token: value, TokenName: t.Name, TokenExpires: t.ExpiresAt})
}
