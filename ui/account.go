package ui

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/store"
)

// ownEventsShown bounds the account page's audit history.
const ownEventsShown = 50

type accountData struct {
	Events []store.AuditEvent
	Tokens []auth.Token
	// Token is the value of a token just created, shown once.
	Token, TokenName, TokenError string
	TokenExpires                 time.Time
	Notice                       string
}

func (u *UI) account(c *fiber.Ctx, s *session) error {
	var data accountData
	if c.Query("password") == "changed" {
		data.Notice = "Your password is changed. Your other sessions have ended; your API tokens still work: revoke below any you do not trust."
	}
	return u.showAccount(c, s, fiber.StatusOK, data)
}

func (u *UI) showAccount(c *fiber.Ctx, s *session, status int, data accountData) error {
	events, err := u.ownEvents(s.ctx, s.ID)
	if err != nil {
		return err
	}
	data.Events = events
	if data.Tokens, err = u.d.Auth.Tokens(s.ctx, s.ID); err != nil {
		return err
	}
	return u.render(c, status, "account", u.view(s, "Account", "account", data))
}

// revokeToken revokes one of the caller's own tokens; another's is not found here.
func (u *UI) revokeToken(c *fiber.Ctx, s *session) error {
	t, err := u.d.Auth.TokenByID(s.ctx, c.Params("token"))
	if err == nil && t.UserID != s.ID {
		if err := u.record(s.ctx, audit.Event{Action: "token.revoke", Subject: t.ID, Result: audit.ResultDenied, Reason: "owner"}); err != nil {
			return err
		}
		err = store.ErrNotFound
	}
	if err != nil {
		return err
	}
	if err := u.d.Auth.RevokeToken(s.ctx, t.ID); err != nil {
		return err
	}
	return u.showAccount(c, s, fiber.StatusOK, accountData{Notice: "Token “" + t.Name + "” is revoked: it is refused from now on."})
}

type passwordData struct {
	// Required: the password was generated and must be changed before anything else.
	Required bool
	// Location is the field a refusal is about: current or new.
	Location string
}

func (u *UI) passwordPage(c *fiber.Ctx, s *session) error {
	return u.showPassword(c, s, fiber.StatusOK, "", "")
}

func (u *UI) showPassword(c *fiber.Ctx, s *session, status int, location, message string) error {
	v := u.view(s, "Change your password", "account", passwordData{Required: s.MustChangePassword, Location: location})
	v.Error = message
	return u.render(c, status, "password", v)
}

// changePassword sets the caller's own password; this session stays, the others end.
func (u *UI) changePassword(c *fiber.Ctx, s *session) error {
	next := c.FormValue("new_password")
	if next != c.FormValue("confirm_password") {
		return u.showPassword(c, s, fiber.StatusBadRequest, "confirm", "The two new passwords differ: type the same one twice.")
	}
	err := u.d.Auth.ChangePassword(s.ctx, s.ID, c.FormValue("current_password"), next, c.Cookies(CookieName), c.IP())
	var pe *auth.PasswordError
	var limited *auth.RateLimitedError
	switch {
	case errors.As(err, &limited):
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(limited.RetryAfter/time.Second)))
		return u.showPassword(c, s, fiber.StatusTooManyRequests, "current", "Too many wrong current passwords from your address: wait "+limited.RetryAfter.String()+" and try again.")
	case errors.Is(err, auth.ErrWrongPassword):
		return u.showPassword(c, s, fiber.StatusBadRequest, "current", "The current password is wrong: type the password you signed in with.")
	case errors.As(err, &pe):
		msg := pe.Reason
		return u.showPassword(c, s, fiber.StatusBadRequest, "new", "Choose another new password: "+msg+".")
	case err != nil:
		return err
	}
	return c.Redirect("/account?password=changed", fiber.StatusSeeOther)
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
