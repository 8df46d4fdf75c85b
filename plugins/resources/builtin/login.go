package main

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/zitadel/oidc/v3/pkg/op"
)

const (
	loginPath = "/login"
	// signedOutPath is where a sign-out without a registered redirect ends.
	signedOutPath = "/signed-out"
	// endSessionPath is op's end_session endpoint.
	endSessionPath = "/end_session"
)

//go:embed login.html
var loginHTML string

var loginPage = template.Must(template.New("login").Parse(loginHTML))

type loginView struct {
	App, Action, ID, CSRF, User, Message string
	Refused, Gone                        bool
	Groups                               []string
	// redirect is the app's redirect URI the sign-in ends at: the form's submission
	// follows redirects there, which form-action must allow (Chromium checks each hop).
	redirect string
}

// formAction is the CSP form-action of a page whose form may end at redirect: the issuer
// itself and the origin of the app's redirect URI (registered, checked when the sign-in
// began); the issuer alone when it is not an http(s) URL with a plain host.
func formAction(redirect string) string {
	u, err := url.Parse(redirect)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		strings.ContainsFunc(u.Host, func(r rune) bool {
			return !(r == '.' || r == '-' || r == ':' || r == '[' || r == ']' || unicode.IsLetter(r) || unicode.IsDigit(r)) || r > unicode.MaxASCII
		}) {
		return "form-action 'self'"
	}
	return "form-action 'self' " + u.Scheme + "://" + u.Host
}

// Rate limits on failed sign-ins: per user name of a deployment, 5 at once and then one
// every 12 seconds; per client address, 20 at once and then one every 3 seconds.
const (
	userFailureBurst = 5
	userFailureEvery = 12 * time.Second
	addrFailureBurst = 20
	addrFailureEvery = 3 * time.Second
	maxLimiterKeys   = 100000
)

const (
	msgWrong     = "The user name or the password is wrong."
	msgLimited   = "Too many failed sign-ins. Wait a minute, then try again."
	msgGone      = "This sign-in has expired or is unknown. Go back to the app and start again."
	msgForm      = "This form has expired. Go back to the app and start again."
	msgDown      = "The directory cannot be reached just now. Try again in a minute."
	msgSignedOut = "You are signed out."
)

func csrfCookie(id string) string { return "fedhost_login_" + id }

// sessionCookie holds a sign-in at the issuer, which lets the user into the deployment's
// other apps without the password while it lasts. SameSite=Lax: it must come with the
// top-level navigation from an app to /login.
const sessionCookie = "fedhost_session"

func render(w http.ResponseWriter, status int, v loginView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "+formAction(v.redirect)+"; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, v)
}

// login serves the log-in page of one deployment: GET shows the form of a sign-in in
// progress, POST checks it against the directory.
func (s *server) login(w http.ResponseWriter, r *http.Request, t *tenant, o origin) {
	switch r.Method {
	case http.MethodGet:
		a, err := t.authRequest(r.URL.Query().Get("id"))
		if err != nil {
			render(w, http.StatusBadRequest, loginView{Gone: true, Message: msgGone})
			return
		}
		if s.fromSession(w, r, t, a) {
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: csrfCookie(a.ID), Value: a.csrf, Path: loginPath, MaxAge: int(authRequestLifetime / time.Second),
			HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
		})
		render(w, http.StatusOK, loginView{App: t.appName(a.ClientID), Action: loginPath, ID: a.ID, CSRF: a.csrf, redirect: a.RedirectURI})
	case http.MethodPost:
		s.loginPost(w, r, t, o)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
	}
}

func (s *server) loginPost(w http.ResponseWriter, r *http.Request, t *tenant, o origin) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		render(w, http.StatusBadRequest, loginView{Gone: true, Message: msgForm})
		return
	}
	a, err := t.authRequest(r.PostForm.Get("id"))
	if err != nil {
		render(w, http.StatusBadRequest, loginView{Gone: true, Message: msgGone})
		return
	}
	cookie, err := r.Cookie(csrfCookie(a.ID))
	if err != nil || !equal(cookie.Value, a.csrf) || !equal(r.PostForm.Get("csrf"), a.csrf) {
		render(w, http.StatusForbidden, loginView{Gone: true, Message: msgForm})
		return
	}
	app := t.appName(a.ClientID)
	name := strings.TrimSpace(r.PostForm.Get("username"))
	if len(name) > 64 {
		name = name[:64]
	}
	view := loginView{App: app, Action: loginPath, ID: a.ID, CSRF: a.csrf, User: name, redirect: a.RedirectURI}
	now := s.now()
	userKey := t.name + "\x00" + strings.ToLower(name)
	addrKey := o.client.String()
	if s.users.blocked(userKey, now) || s.addrs.blocked(addrKey, now) {
		view.Message = msgLimited
		w.Header().Set("Retry-After", "60")
		render(w, http.StatusTooManyRequests, view)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	u, err := t.directory().authenticate(ctx, name, r.PostForm.Get("password"))
	if errors.Is(err, errBadCredentials) {
		s.users.fail(userKey, now)
		s.addrs.fail(addrKey, now)
		s.log.Info("sign-in refused", "tenant", t.name, "client", a.ClientID, "reason", "wrong user name or password")
		view.Message = msgWrong
		render(w, http.StatusUnauthorized, view)
		return
	}
	if err != nil {
		s.log.Error("sign-in failed: the directory", "tenant", t.name, "error", err)
		view.Message = msgDown
		render(w, http.StatusServiceUnavailable, view)
		return
	}
	client := t.client(a.ClientID)
	if client == nil {
		render(w, http.StatusBadRequest, loginView{Gone: true, Message: msgGone})
		return
	}
	if !admitted(client, u) {
		_ = t.DeleteAuthRequest(ctx, a.ID)
		s.log.Info("sign-in refused", "tenant", t.name, "client", a.ClientID, "user", u.Name, "reason", "in none of the client's allowed groups")
		render(w, http.StatusForbidden, loginView{App: app, Refused: true, User: u.Name, Groups: client.AllowedGroups})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: csrfCookie(a.ID), Value: "", Path: loginPath, MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	if v := t.newSession(u, now); v != "" {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: v, Path: "/", MaxAge: int(sessionLifetime / time.Second), HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	}
	s.finish(w, r, t, a, u, now, "password")
}

// fromSession completes the sign-in a from the browser's session at the issuer, when it
// has one and the sign-in does not ask for the password: the user is read from the
// directory again (gone, disabled or out of the client's groups counts now, not at the
// session's start). It reports whether it answered.
func (s *server) fromSession(w http.ResponseWriter, r *http.Request, t *tenant, a *authRequest) bool {
	c, err := r.Cookie(sessionCookie)
	if err != nil || a.forceLogin {
		return false
	}
	ss := t.sessionOf(c.Value)
	if ss == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	_, u, err := t.directory().find(ctx, ss.user.Name)
	if err != nil || u.Subject != ss.user.Subject {
		if errors.Is(err, errBadCredentials) || err == nil {
			t.endSession(c.Value)
		}
		return false
	}
	client := t.client(a.ClientID)
	if client == nil {
		return false
	}
	if !admitted(client, u) {
		_ = t.DeleteAuthRequest(ctx, a.ID)
		s.log.Info("sign-in refused", "tenant", t.name, "client", a.ClientID, "user", u.Name, "reason", "in none of the client's allowed groups")
		render(w, http.StatusForbidden, loginView{App: client.Name, Refused: true, User: u.Name, Groups: client.AllowedGroups})
		return true
	}
	s.finish(w, r, t, a, u, ss.authTime, "session")
	return true
}

// finish marks the sign-in done as u and sends the browser on to op's callback.
func (s *server) finish(w http.ResponseWriter, r *http.Request, t *tenant, a *authRequest, u user, authTime time.Time, how string) {
	if !t.complete(a.ID, u, authTime) {
		render(w, http.StatusBadRequest, loginView{Gone: true, Message: msgGone})
		return
	}
	s.log.Info("signed in", "tenant", t.name, "client", a.ClientID, "user", u.Name, "by", how)
	provider, err := t.handler()
	if err != nil {
		render(w, http.StatusServiceUnavailable, loginView{Gone: true, Message: msgDown})
		return
	}
	callback := op.AuthCallbackURL(provider)(op.ContextWithIssuer(r.Context(), t.issuer()), a.ID)
	http.Redirect(w, r, callback, http.StatusSeeOther)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
