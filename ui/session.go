package ui

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/auth"
)

type loginData struct {
	Name, Next string
}

func (u *UI) loginPage(c *fiber.Ctx) error {
	return u.render(c, fiber.StatusOK, "login", u.view(nil, "Log in", "", loginData{Next: localPath(c.Query("next"))}))
}

// login checks the password (auth records the attempt), begins a session and sets its cookie.
func (u *UI) login(c *fiber.Ctx) error {
	ctx := c.UserContext()
	name, next := c.FormValue("name"), localPath(c.FormValue("next"))
	user, err := u.d.Auth.Authenticate(ctx, name, c.FormValue("password"), c.IP())
	if err != nil {
		v := u.view(nil, "Log in", "", loginData{Name: name, Next: next})
		status := fiber.StatusUnauthorized
		switch {
		case errors.Is(err, auth.ErrRateLimited):
			status, v.Error = fiber.StatusTooManyRequests, "Too many failed logins: wait 15 minutes and try again."
		case errors.Is(err, auth.ErrBadCredentials):
			v.Error = "Wrong user name or password. Check both and try again."
		default:
			return u.failure(c, nil, err)
		}
		return u.render(c, status, "login", v)
	}
	ns, err := u.d.Auth.NewSession(ctx, user.ID)
	if err != nil {
		return u.failure(c, nil, err)
	}
	c.Cookie(&fiber.Cookie{
		Name: CookieName, Value: ns.ID, Path: "/", Expires: ns.ExpiresAt,
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: c.Protocol() == "https",
	})
	return c.Redirect(next, fiber.StatusSeeOther)
}

func (u *UI) logout(c *fiber.Ctx, s *session) error {
	if err := u.d.Auth.EndSession(s.ctx, c.Cookies(CookieName)); err != nil {
		return err
	}
	clearCookie(c)
	return c.Redirect("/login", fiber.StatusSeeOther)
}

// clearCookie ends the browser's session cookie, with the path it was set with.
func clearCookie(c *fiber.Ctx) {
	c.Cookie(&fiber.Cookie{
		Name: CookieName, Path: "/", Expires: time.Unix(0, 0), MaxAge: -1,
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: c.Protocol() == "https",
	})
}
