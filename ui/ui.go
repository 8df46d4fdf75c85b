package ui

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/headers"
	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/ui/form"
)

// CookieName is the session cookie the UI and the API share.
const CookieName = "fedhost_session"

//go:embed templates/*.html static/*
var files embed.FS

// Deps is what the UI serves from. Plugins and Audit may be nil.
type Deps struct {
	Engine  *deploy.Engine
	Store   *store.Store
	Auth    *auth.Service
	Audit   *audit.Log
	Plugins *plugins.Manager
	Version string
	// OIDC, when set, adds single sign-on to the log-in page, on a button labelled OIDCButton.
	OIDC       *auth.OIDC
	OIDCButton string
	// PasswordLinkTTL is how long an invitation or reset link of a deployment's user works
	// (directory.DefaultLinkTTL when 0).
	PasswordLinkTTL time.Duration
	// SuggestedDomain is the domain offered to a deployment that has none yet, with
	// {namespace} standing for its namespace (fedhost.hcl's suggested_domain); "" offers none.
	SuggestedDomain string
	// Migration, when set, opens the migration strings of the Import page (which is
	// not served without it).
	Migration *migration.Keys
	// PublicURL is the address this fedhost is reached at (fedhost.hcl's public_url,
	// without a trailing slash): the source URL of migration strings and the base of
	// mailed links. "" takes each request's own address.
	PublicURL string
}

// publicBase is the base of the URLs this fedhost hands out: PublicURL, or the request's
// address when it is not set (set says which).
func (u *UI) publicBase(c *fiber.Ctx) (base string, set bool) {
	if u.d.PublicURL != "" {
		return u.d.PublicURL, true
	}
	return c.BaseURL(), false
}

// UI is the operators' web interface.
type UI struct {
	d     Deps
	pages map[string]*template.Template
	// snapshots lists an app's backups (the engine's Backups); tests replace it, as the
	// repository it asks needs restic and S3.
	snapshots func(ctx context.Context, deploymentID, app string) ([]backup.Snapshot, error)
}

// New returns the UI of d; it panics if a template does not parse, which a test catches.
func New(d Deps) *UI {
	u := &UI{d: d, pages: map[string]*template.Template{}}
	u.snapshots = func(ctx context.Context, id, app string) ([]backup.Snapshot, error) {
		return u.d.Engine.Backups(ctx, id, app)
	}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		base := path.Base(name)
		if base == "layout.html" {
			continue
		}
		t := template.New("layout.html").Funcs(funcs)
		u.pages[strings.TrimSuffix(base, ".html")] = template.Must(t.ParseFS(files, "templates/layout.html", name))
	}
	return u
}

// session is the signed-in user of a request.
type session struct {
	auth.User
	CSRF string
	ctx  context.Context
}

type handler func(c *fiber.Ctx, s *session) error

// Mount registers the pages on app, beside the API's /api/v1.
func (u *UI) Mount(app *fiber.App) {
	// A form is small; a configuration may be large (the server reads no more).
	small, configuration := u.bodyLimit(input.MaxBody), u.bodyLimit(input.MaxConfigBody)
	app.Get("/static/form.js", func(c *fiber.Ctx) error {
		c.Type("js")
		c.Set(fiber.HeaderCacheControl, "no-cache")
		return c.SendString(form.Script)
	})
	app.Get("/static/:file", u.static)
	app.Get("/login", u.loginPage)
	app.Post("/login", small, u.login)
	app.Get("/login/oidc", u.oidcStart)
	app.Get("/login/oidc/callback", u.oidcCallback)
	app.Post("/logout", small, u.signedIn(u.logout))
	app.Get("/", func(c *fiber.Ctx) error { return c.Redirect("/deployments", fiber.StatusSeeOther) })

	app.Get("/deployments", u.signedIn(u.deployments))
	app.Get("/deployments/new", u.signedIn(u.newDeployment))
	app.Get("/deployments/import", u.signedIn(u.importPage))
	app.Post("/deployments/import", u.bodyLimit(importBody), u.signedIn(u.importDeployment))
	app.Post("/deployments/new", small, u.signedIn(u.createDeployment))
	app.Get("/deployments/:id", u.signedIn(u.deployment))
	app.Post("/deployments/:id/suspend", small, u.signedIn(u.operation("deployment.suspend", (*deploy.Engine).Suspend)))
	app.Post("/deployments/:id/resume", small, u.signedIn(u.operation("deployment.resume", (*deploy.Engine).Resume)))
	app.Get("/deployments/:id/destroy", u.signedIn(u.destroyPage))
	app.Post("/deployments/:id/destroy", small, u.signedIn(u.destroy))
	app.Get("/deployments/:id/export", u.signedIn(u.exportPage))
	app.Post("/deployments/:id/export", small, u.signedIn(u.export))
	app.Get("/deployments/:id/configure", u.signedIn(u.configurePage))
	app.Post("/deployments/:id/configure", configuration, u.signedIn(u.configure))
	app.Get("/deployments/:id/builds", u.signedIn(u.history))
	app.Get("/deployments/:id/policy", u.signedIn(u.policyPage))
	app.Post("/deployments/:id/policy", small, u.signedIn(u.setPolicy))
	app.Get("/deployments/:id/backups/:app", u.signedIn(u.backups))
	app.Post("/deployments/:id/backups/:app", small, u.signedIn(u.backUp))
	app.Post("/deployments/:id/backups/:app/drill", small, u.signedIn(u.drill))
	app.Get("/deployments/:id/backups/:app/restore/:snapshot", u.signedIn(u.restorePage))
	app.Post("/deployments/:id/backups/:app/restore/:snapshot", small, u.signedIn(u.restore))
	app.Get("/deployments/:id/users", u.signedIn(u.usersPage))
	app.Post("/deployments/:id/users", small, u.signedIn(u.addUser))
	app.Post("/deployments/:id/users/:user/groups", small, u.signedIn(u.changeMembership))
	app.Post("/deployments/:id/users/:user/:change", small, u.signedIn(u.changeUser))
	app.Get(setPasswordPath, u.public(u.setPasswordPage))
	app.Post(setPasswordPath, small, u.setPasswordLimit(), u.public(u.setPassword))
	app.Get("/deployments/:id/operations/:app/:name", u.signedIn(u.operationPage))
	app.Post("/deployments/:id/operations/:app/:name", small, u.signedIn(u.runOperation))
	app.Post("/deployments/:id/operations/:app/:name/schedules/:schedule/delete", small, u.signedIn(u.deleteSchedule))
	app.Get("/deployments/:id/runs/:run", u.signedIn(u.runPage))
	app.Post("/deployments/:id/runs/:run/cancel", small, u.signedIn(u.cancelRun))
	app.Get("/builds/:id", u.signedIn(u.build))
	app.Get("/domains", u.signedIn(u.domains))
	app.Get("/usage", u.signedIn(u.usage))

	app.Get("/account", u.signedIn(u.account))
	app.Post("/account/tokens", small, u.signedIn(u.createToken))
	app.Post("/account/tokens/:token/revoke", small, u.signedIn(u.revokeToken))
	app.Get(passwordPath, u.signedIn(u.passwordPage))
	app.Post(passwordPath, small, u.signedIn(u.changePassword))

	app.Get("/admin/operators", u.signedIn(u.superuser("admin.operators", u.operators)))
	app.Post("/admin/operators", small, u.signedIn(u.superuser("user.create", u.createOperator)))
	app.Get("/admin/operators/:name", u.signedIn(u.superuser("admin.operators", u.operatorPage)))
	app.Post("/admin/operators/:name/tokens/:token/revoke", small, u.signedIn(u.superuser("token.revoke", u.revokeOperatorToken)))
	app.Post("/admin/operators/:name/:change", small, u.signedIn(u.superuser("user.change", u.changeOperator)))
	app.Get("/admin/plugins", u.signedIn(u.superuser("admin.plugins", u.pluginsPage)))
	app.Get("/admin/catalog", u.signedIn(u.superuser("admin.catalog", u.catalogPage)))
	app.Get("/admin/jobs", u.signedIn(u.superuser("admin.jobs", u.jobs)))
	app.Post("/admin/jobs/:id/cancel", small, u.signedIn(u.superuser("build.cancel", u.cancelJob)))
}

// bodyLimit refuses a form over max bytes with a page that says so, before it is read.
func (u *UI) bodyLimit(max int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if len(c.Request().Body()) > max {
			return u.refusal(c, nil, fiber.StatusRequestEntityTooLarge, "Too large",
				fmt.Sprintf("This form sent more than %d KiB, more than fedhost takes here. Shorten what you typed and send it again.", max>>10))
		}
		return c.Next()
	}
}

func (u *UI) static(c *fiber.Ctx) error {
	name := c.Params("file")
	b, err := fs.ReadFile(files, "static/"+name)
	if err != nil {
		return c.SendStatus(fiber.StatusNotFound)
	}
	c.Type(strings.TrimPrefix(path.Ext(name), "."))
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(b)
}

// signedIn gives h the request's session, or sends the browser to the login page; it
// refuses an unsafe request without the session's CSRF token.
func (u *UI) signedIn(h handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id := c.Cookies(CookieName)
		if id == "" {
			return toLogin(c)
		}
		sess, err := u.d.Auth.Session(c.UserContext(), id)
		if errors.Is(err, auth.ErrNoSession) {
			clearCookie(c)
			return toLogin(c)
		}
		if err != nil {
			return u.failure(c, nil, err)
		}
		ctx := audit.WithActor(c.UserContext(), audit.Actor{ID: sess.User.ID, Issuer: audit.IssuerSession, ClientIP: c.IP()})
		c.SetUserContext(ctx)
		c.Locals("user", sess.User)
		s := &session{User: sess.User, CSRF: sess.CSRFToken, ctx: ctx}
		if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead {
			if subtle.ConstantTimeCompare([]byte(csrfOf(c)), []byte(sess.CSRFToken)) != 1 {
				if err := u.record(ctx, audit.Event{Action: "session.csrf", Result: audit.ResultDenied, Reason: c.Route().Path}); err != nil {
					return u.failure(c, s, err)
				}
				return u.refusal(c, s, fiber.StatusForbidden, "Forbidden",
					"This form was not sent from a page of your current session. Go back, reload the page and send it again.")
			}
		}
		// A generated password is changed before anything else; signing out stays possible.
		if s.MustChangePassword && c.Path() != passwordPath && c.Path() != "/logout" {
			return c.Redirect(passwordPath, fiber.StatusSeeOther)
		}
		if err := h(c, s); err != nil {
			return u.failure(c, s, err)
		}
		return nil
	}
}

// passwordPath is the page that changes the signed-in user's password.
const passwordPath = "/account/password"

// csrfOf is the CSRF token of an unsafe request: from the form's body, or the
// X-CSRF-Token header of a script; never from the query string, which an address
// shared, logged or sent on as Referer would give away.
func csrfOf(c *fiber.Ctx) string {
	if v := c.Get("X-CSRF-Token"); v != "" {
		return v
	}
	if f, err := c.MultipartForm(); err == nil {
		if v := f.Value["csrf"]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return string(c.Request().PostArgs().Peek("csrf"))
}

// superuser lets only superusers through to h and records the refusal of anyone else.
func (u *UI) superuser(action string, h handler) handler {
	return func(c *fiber.Ctx, s *session) error {
		if !s.Superuser {
			e := audit.Event{Action: action, Result: audit.ResultDenied, Reason: "superuser"}
			if id := c.Params("id"); id != "" && strings.HasPrefix(c.Route().Path, "/admin/jobs/") {
				// A job is a build: the refusal names it, and its deployment when it exists.
				e.BuildID = id
				if b, err := u.d.Store.GetBuild(s.ctx, id); err == nil {
					e.DeploymentID = b.DeploymentID
				}
			}
			if err := u.record(s.ctx, e); err != nil {
				return err
			}
			return u.refusal(c, s, fiber.StatusForbidden, "Forbidden", "Only superusers may open the administration pages.")
		}
		return h(c, s)
	}
}

func toLogin(c *fiber.Ctx) error {
	next := c.OriginalURL()
	if c.Method() != fiber.MethodGet {
		next = "/"
	}
	return c.Redirect("/login?next="+url.QueryEscape(next), fiber.StatusSeeOther)
}

// errDenied is an operator reaching for another operator's deployment.
var errDenied = errors.New("this deployment belongs to another operator")

// ownDeployment returns deployment id if s may see and change it; a refusal is recorded
// as action.
func (u *UI) ownDeployment(s *session, id, action string) (store.Deployment, error) {
	return u.ownDeploymentFor(s, id, audit.Event{Action: action})
}

// ownDeploymentFor is ownDeployment with the refusal's event given, such as one that
// names the build asked for.
func (u *UI) ownDeploymentFor(s *session, id string, refusal audit.Event) (store.Deployment, error) {
	d, err := u.d.Engine.Deployment(s.ctx, id)
	if err != nil {
		return d, err
	}
	if d.Owner != s.ID && !s.Superuser {
		refusal.DeploymentID, refusal.Result, refusal.Reason = d.ID, audit.ResultDenied, "owner"
		err := u.record(s.ctx, refusal)
		return store.Deployment{}, errors.Join(errDenied, err)
	}
	return d, nil
}

func (u *UI) record(ctx context.Context, e audit.Event) error {
	if u.d.Audit == nil {
		return nil
	}
	return u.d.Audit.Record(ctx, e)
}

// resultOf is the audit result of an engine call that ended in err.
func resultOf(err error) (audit.Result, string) {
	var de *deploy.Error
	switch {
	case err == nil:
		return audit.ResultOK, ""
	case errors.As(err, &de):
		reason := de.Location
		if reason == "" {
			reason = de.Code
		}
		return audit.ResultInvalid, reason
	}
	return audit.ResultError, ""
}

// view is what every page gets; Data is the page's own.
type view struct {
	Title   string
	Nav     string
	User    *auth.User
	CSRF    string
	Version string
	Error   string
	Data    any
}

func (u *UI) view(s *session, title, nav string, data any) view {
	v := view{Title: title, Nav: nav, Version: u.d.Version, Data: data}
	if s != nil {
		v.User, v.CSRF = &s.User, s.CSRF
	}
	return v
}

func (u *UI) render(c *fiber.Ctx, status int, page string, v view) error {
	t, ok := u.pages[page]
	if !ok {
		return fmt.Errorf("ui: no template %s", page)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		return fmt.Errorf("rendering page %s: %w", page, err)
	}
	headers.Set(c, headers.PageCSP)
	c.Type("html", "utf-8")
	return c.Status(status).Send(b.Bytes())
}

// refusal shows a page that says why the request was refused.
func (u *UI) refusal(c *fiber.Ctx, s *session, status int, title, message string) error {
	return u.render(c, status, "error", u.view(s, title, "", message))
}

// failure shows the error a handler returned as a page with its status.
func (u *UI) failure(c *fiber.Ctx, s *session, err error) error {
	var de *deploy.Error
	switch {
	case errors.Is(err, errDenied):
		return u.refusal(c, s, fiber.StatusForbidden, "Forbidden", "This deployment belongs to another operator: you may see and change only your own.")
	case errors.As(err, &de) && de.Code == deploy.CodeNotFound, errors.Is(err, store.ErrNotFound):
		return u.refusal(c, s, fiber.StatusNotFound, "Not found", "There is no such page here: check the address, or go back to your deployments.")
	case errors.As(err, &de):
		return u.refusal(c, s, fiber.StatusConflict, "Refused", de.Message)
	}
	return u.refusal(c, s, fiber.StatusInternalServerError, "Something went wrong",
		"fedhost could not answer this page: "+err.Error()+". Try again; if it keeps failing, tell your hosting provider.")
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"duration":   buildDuration,
	"short":      short,
	"unfinished": func(s store.BuildState) bool { return !s.Finished() },
	// datetime is t for a <time> element's datetime attribute.
	"datetime":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"has":       func(list []string, s string) bool { return slices.Contains(list, s) },
	"ago":       relative,
	"past":      func(t time.Time) bool { return t.Before(time.Now()) },
	"retention": retention,
	// tokens is what the tokentable template needs: the tokens, where their revoke
	// buttons post to (the token's id and /revoke follow), and the session's CSRF token.
	"tokens": func(list []auth.Token, action, csrf string) any {
		return struct {
			Tokens       []auth.Token
			Action, CSRF string
		}{list, action, csrf}
	},
	"snapshot": shortSnapshot,
	// dict passes named values to a template: dict "Runs" runs "Empty" "No runs yet."
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			if k, ok := kv[i].(string); ok {
				m[k] = kv[i+1]
			}
		}
		return m
	},
	"money": money,
	"day":   func(t time.Time) string { return t.UTC().Format(time.DateOnly) },
	// slug is a state as a class name: "renewal due" is state-renewal-due.
	"slug": func(s string) string { return strings.ReplaceAll(strings.ToLower(s), " ", "-") },
}

// buildDuration is how long a build ran, or has been running.
func buildDuration(b store.Build) string {
	if b.StartedAt == nil {
		return "—"
	}
	end := time.Now()
	if b.FinishedAt != nil {
		end = *b.FinishedAt
	}
	d := end.Sub(*b.StartedAt)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// home is where a log-in goes when it was given no address of this site to return to.
const home = "/deployments"

// maxNext bounds the address a log-in returns to: longer ones are no page of fedhost.
const maxNext = 2048

// localPath keeps a redirect after login on this site: next is used only if it is a
// path of this origin however a browser reads it, else the log-in goes home.
func localPath(next string) string {
	if !samePath(next) {
		return home
	}
	return next
}

// samePath reports whether p is an absolute path of this origin, as a browser
// normalises it (it drops tabs and newlines, and reads a backslash as a slash) and as
// a later decoding of its percent-encoding would read it: so "/\t/evil.example",
// "/\\evil.example" and "/%2F%2Fevil.example" are not.
func samePath(p string) bool {
	if len(p) > maxNext {
		return false
	}
	for range 3 {
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.IndexFunc(p, unsafeInPath) >= 0 {
			return false
		}
		u, err := url.Parse(p)
		if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
			return false
		}
		decoded, err := url.PathUnescape(p)
		if err != nil {
			return false
		}
		if decoded == p {
			return true
		}
		p = decoded
	}
	// Encoded more than three times over: no link of fedhost is.
	return false
}

// unsafeInPath is a rune a browser drops from or rewrites in a URL (control
// characters, tabs and newlines, the backslash) or one that would hide what the path
// says (bidirectional overrides, invalid UTF-8).
func unsafeInPath(r rune) bool { return r == '\\' || input.Unsafe(r) }
