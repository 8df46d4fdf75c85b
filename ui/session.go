package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
)

// oidcCookie carries the state, nonce and PKCE verifier of one single sign-on from
// /login/oidc to its callback. It is neither signed nor kept server-side: an
// attacker who could plant it could as well plant one from a log-in of their own, so
// a signature would add nothing, and memory on the server would break several
// fedhost processes behind one address and grow with anonymous requests.
const oidcCookie = "fedhost_oidc"

type loginData struct {
	Name, Next string
	// OIDCButton labels the single sign-on button; "" shows none.
	OIDCButton string
}

func (u *UI) loginData(name, next string) loginData {
	d := loginData{Name: name, Next: next}
	if u.d.OIDC != nil {
		d.OIDCButton = u.d.OIDCButton
	}
	return d
}

// loginCookie holds the log-in form's CSRF token until the form comes back: before a
// session there is no session token, and a form posted from another site (a log-in CSRF,
// signing the victim into the attacker's account) must not be taken. The form carries
// the same token; another site can neither read nor set the cookie.
const loginCookie = "fedhost_login"

// loginView is the log-in page with a fresh CSRF token, in its form and its cookie.
func (u *UI) loginView(c *fiber.Ctx, name, next string) view {
	token := rand.Text()
	c.Cookie(&fiber.Cookie{
		Name: loginCookie, Value: token, Path: "/login", MaxAge: int(time.Hour / time.Second),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: c.Protocol() == "https",
	})
	v := u.view(nil, "Log in", "", u.loginData(name, next))
	v.CSRF = token
	return v
}

func (u *UI) loginPage(c *fiber.Ctx) error {
	return u.render(c, fiber.StatusOK, "login", u.loginView(c, "", localPath(c.Query("next"))))
}

// login checks the form's CSRF token and the password (auth records the attempt),
// begins a session and sets its cookie.
func (u *UI) login(c *fiber.Ctx) error {
	ctx := c.UserContext()
	name, next := c.FormValue("name"), localPath(c.FormValue("next"))
	cookie, form := c.Cookies(loginCookie), csrfOf(c)
	if cookie == "" || subtle.ConstantTimeCompare([]byte(cookie), []byte(form)) != 1 {
		v := u.loginView(c, name, next)
		v.Error = "This log-in form has expired or was sent from another site: log in again with this one."
		return u.render(c, fiber.StatusForbidden, "login", v)
	}
	user, err := u.d.Auth.Authenticate(ctx, name, c.FormValue("password"), c.IP())
	if err != nil {
		v := u.loginView(c, name, next)
		status := fiber.StatusUnauthorized
		var limited *auth.RateLimitedError
		switch {
		case errors.As(err, &limited):
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(limited.RetryAfter/time.Second)))
			status, v.Error = fiber.StatusTooManyRequests, "Too many failed logins from your address: wait "+limited.RetryAfter.String()+" and try again."
		case errors.Is(err, auth.ErrBadCredentials):
			v.Error = "Wrong user name or password. Check both and try again."
		default:
			return u.failure(c, nil, err)
		}
		return u.render(c, status, "login", v)
	}
	c.Cookie(&fiber.Cookie{Name: loginCookie, Path: "/login", Expires: time.Unix(0, 0), MaxAge: -1})
	return u.beginSession(c, user, audit.IssuerPassword, next)
}

// beginSession begins a session of user, sets its cookie and sends the browser to next.
func (u *UI) beginSession(c *fiber.Ctx, user auth.User, issuer audit.Issuer, next string) error {
	ns, err := u.d.Auth.NewSessionBy(c.UserContext(), user.ID, issuer)
	if err != nil {
		return u.failure(c, nil, err)
	}
	c.Cookie(&fiber.Cookie{
		Name: CookieName, Value: ns.ID, Path: "/", Expires: ns.ExpiresAt,
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: c.Protocol() == "https",
	})
	return c.Redirect(next, fiber.StatusSeeOther)
}

// oidcStart sends the browser to the OpenID provider, with what the callback needs
// to check the answer in a cookie that only the callback's path receives.
func (u *UI) oidcStart(c *fiber.Ctx) error {
	if u.d.OIDC == nil {
		return u.refusal(c, nil, fiber.StatusNotFound, "Not found", "Single sign-on is not set up here: log in with your user name and password.")
	}
	authURL, state, nonce, verifier := u.d.OIDC.AuthURL()
	flow := url.Values{"state": {state}, "nonce": {nonce}, "verifier": {verifier}, "next": {localPath(c.Query("next"))}}
	// SameSite Lax: the provider sends the browser back with a top-level GET from its own site.
	c.Cookie(&fiber.Cookie{
		Name: oidcCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(flow.Encode())), Path: "/login/oidc",
		MaxAge: int(auth.OIDCLoginTimeout.Seconds()), Expires: time.Now().Add(auth.OIDCLoginTimeout),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: c.Protocol() == "https",
	})
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Redirect(authURL, fiber.StatusSeeOther)
}

// oidcCallback finishes the single sign-on the provider sent the browser back from,
// and begins a session as a password log-in does. The flow cookie is used once.
func (u *UI) oidcCallback(c *fiber.Ctx) error {
	if u.d.OIDC == nil {
		return u.refusal(c, nil, fiber.StatusNotFound, "Not found", "Single sign-on is not set up here: log in with your user name and password.")
	}
	var flow url.Values
	if b, err := base64.RawURLEncoding.DecodeString(c.Cookies(oidcCookie)); err == nil {
		flow, _ = url.ParseQuery(string(b))
	}
	c.Cookie(&fiber.Cookie{
		Name: oidcCookie, Path: "/login/oidc", Expires: time.Unix(0, 0), MaxAge: -1,
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: c.Protocol() == "https",
	})
	c.Set(fiber.HeaderCacheControl, "no-store")
	next := localPath(flow.Get("next"))
	c.SetUserContext(audit.WithActor(c.UserContext(), audit.Actor{ClientIP: c.IP()}))

	if code := c.Query("error"); code != "" {
		return u.oidcRefused(c, next, u.d.OIDC.Refused(c.UserContext(), code))
	}
	user, err := u.d.OIDC.Finish(c.UserContext(), c.Query("code"), flow.Get("state"), flow.Get("nonce"), flow.Get("verifier"), c.Query("state"))
	if err != nil {
		return u.oidcRefused(c, next, err)
	}
	return u.beginSession(c, user, audit.IssuerOIDC, next)
}

// oidcRefused shows why a single sign-on was refused on the log-in page.
func (u *UI) oidcRefused(c *fiber.Ctx, next string, err error) error {
	if !errors.Is(err, auth.ErrOIDCRefused) {
		return u.failure(c, nil, err)
	}
	v := u.loginView(c, "", next)
	msg := err.Error()
	v.Error = strings.ToUpper(msg[:1]) + msg[1:] + "."
	return u.render(c, fiber.StatusForbidden, "login", v)
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
