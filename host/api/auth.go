package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/store"
)

// SessionCookie holds the id of a browser session.
const SessionCookie = "fedhost_session"

// Access says who may call a route.
type Access int

// The access rules of the authorization table.
const (
	// Public routes need no login.
	Public Access = iota
	// Signed routes need any signed-in user.
	Signed
	// Owner routes need the owner of the deployment (or build) the route names, or a superuser.
	Owner
	// Superuser routes need a superuser.
	Superuser
)

func (a Access) String() string {
	return [...]string{"public", "signed-in user", "owner", "superuser"}[a]
}

// caller is who makes a request.
type caller struct {
	user   auth.User
	issuer audit.Issuer
	csrf   string // the session's CSRF token; empty for a bearer token
}

const localCaller = "caller"

func callerOf(c *fiber.Ctx) (caller, bool) {
	cl, ok := c.Locals(localCaller).(caller)
	return cl, ok
}

// authenticate identifies the caller by bearer token or session cookie; it refuses
// nothing itself: the route's rule does.
func (h *handlers) authenticate(c *fiber.Ctx) error {
	ctx := c.UserContext()
	if v := c.Get(fiber.HeaderAuthorization); strings.HasPrefix(v, "Bearer ") {
		u, err := h.d.Auth.TokenOwner(ctx, strings.TrimPrefix(v, "Bearer "))
		if err == nil {
			c.Locals(localCaller, caller{user: u, issuer: audit.IssuerToken})
		} else if !errors.Is(err, auth.ErrBadToken) {
			return err
		}
	} else if id := c.Cookies(SessionCookie); id != "" {
		s, err := h.d.Auth.Session(ctx, id)
		if err == nil {
			c.Locals(localCaller, caller{user: s.User, issuer: audit.IssuerSession, csrf: s.CSRFToken})
		} else if !errors.Is(err, auth.ErrNoSession) {
			return err
		}
	}
	a := audit.Actor{RequestID: requestID(c), ClientIP: c.IP()}
	if cl, ok := callerOf(c); ok {
		a.ID, a.Issuer = cl.user.ID, cl.issuer
	}
	c.SetUserContext(audit.WithActor(ctx, a))
	return c.Next()
}

func requestID(c *fiber.Ctx) string {
	id, _ := c.Locals("requestid").(string)
	return id
}

// route registers a handler under the rule of the authorization table; action names the
// call in the audit trail, "" for a call that changes nothing.
func (h *handlers) route(r fiber.Router, method, path string, rule Access, action string, handler fiber.Handler) {
	h.table = append(h.table, Rule{Method: method, Path: path, Access: rule, Action: action})
	limit := input.MaxBody
	if configRoutes[path] {
		limit = input.MaxConfigBody
	}
	if path == importPath {
		limit = importBody
	}
	r.Add(method, path, input.BodyLimit(limit), func(c *fiber.Ctx) error {
		if err := h.authorize(c, rule, action); err != nil {
			return err
		}
		if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead && len(c.Body()) > 0 && !isJSON(c) {
			err := errNotJSON
			if action != "" {
				h.recordResult(c, action, err)
			}
			return err
		}
		err := handler(c)
		if action != "" {
			h.recordResult(c, action, err)
		}
		return err
	})
}

// configRoutes take a whole configuration as their body; every other route a small one.
var configRoutes = map[string]bool{"/deployments/:id/submit": true, "/deployments/:id/preview": true}

// Rule is one line of the authorization table.
type Rule struct {
	Method, Path string
	Access       Access
	Action       string
}

// refused is the answer of a call refused before its handler ran for what it sent, not
// for who sent it.
type refused struct {
	status  int
	code    string
	message string
}

func (r *refused) Error() string { return r.message }

// errNotJSON refuses a body that does not say it is JSON. Besides being what the API
// reads, this keeps a plain HTML form on another site from posting to it: a JSON
// content type makes a browser ask first (a CORS preflight), which fedhost does not
// answer (docs/security.md).
var errNotJSON = &refused{status: fiber.StatusUnsupportedMediaType, code: "unsupported_media_type",
	message: "send the body as JSON, with Content-Type: application/json"}

func isJSON(c *fiber.Ctx) bool {
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	return err == nil && mt == fiber.MIMEApplicationJSON
}

// crossSite reports whether a browser sent the request from a page of another site:
// by Sec-Fetch-Site where the browser sends it (every current one does), else by an
// Origin that is not this host. Scripts send neither, and pass.
func crossSite(c *fiber.Ctx) bool {
	switch c.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default:
		// cross-site, and same-site too: a sibling subdomain may be another tenant's.
		return true
	}
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, c.Hostname())
}

// passwordChangeAllowed are the calls a session whose password must be changed may
// still make: who it is, the change itself, and signing out (public).
var passwordChangeAllowed = map[string]bool{
	fiber.MethodGet + " /api/v1/me":          true,
	fiber.MethodPut + " /api/v1/me/password": true,
}

// denied is the answer of a refused call, recorded in the audit trail.
type denied struct {
	status  int
	code    string
	message string
}

func (d *denied) Error() string { return d.message }

func (h *handlers) authorize(c *fiber.Ctx, rule Access, action string) error {
	if rule == Public {
		return nil
	}
	refuse := func(status int, code, reason, message string) error {
		act := action
		if act == "" {
			act = strings.ToLower(c.Method()) + " " + c.Route().Path
		}
		deploymentID, buildID := h.subjectOf(c)
		h.record(c, audit.Event{Action: act, Result: audit.ResultDenied, Reason: reason, DeploymentID: deploymentID, BuildID: buildID})
		return &denied{status: status, code: code, message: message}
	}
	cl, ok := callerOf(c)
	if !ok {
		return refuse(fiber.StatusUnauthorized, "unauthenticated", "no session or token", "sign in, or send an API token as Authorization: Bearer")
	}
	if cl.csrf != "" && c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead && c.Get("X-CSRF-Token") != cl.csrf {
		return refuse(fiber.StatusForbidden, "authz_denied", "csrf", "the X-CSRF-Token header does not match this session")
	}
	// A token was made by the user after changing the password, or by the provider on
	// the host's command line: only a session can carry a password still to change.
	if cl.issuer == audit.IssuerSession && cl.user.MustChangePassword && !passwordChangeAllowed[c.Method()+" "+c.Route().Path] {
		return refuse(fiber.StatusForbidden, "password_change_required", "password change",
			"change your password first: PUT /api/v1/me/password with {\"current_password\", \"new_password\"}, or in the web interface")
	}
	switch rule {
	case Superuser:
		if !cl.user.Superuser {
			return refuse(fiber.StatusForbidden, "authz_denied", "superuser", "only a superuser may call this")
		}
	case Owner:
		owner, err := h.ownerOf(c)
		if err != nil {
			return err
		}
		if owner != cl.user.ID && !cl.user.Superuser {
			what := "deployment"
			if c.Params("token") != "" {
				what = "token"
			}
			return refuse(fiber.StatusForbidden, "authz_denied", "owner", "only the "+what+"'s owner may call this")
		}
	}
	return nil
}

// buildRoute reports whether the :id of a route is a build's (builds, their events, and
// the jobs, which are builds), not a deployment's.
func buildRoute(c *fiber.Ctx) bool {
	path := strings.TrimPrefix(c.Route().Path, "/api/v1")
	return strings.HasPrefix(path, "/builds/") || strings.HasPrefix(path, "/jobs/")
}

// subjectOf names, for the audit trail, the deployment and build the route's :id is: on a
// build route the build, and its deployment when the build exists.
func (h *handlers) subjectOf(c *fiber.Ctx) (deploymentID, buildID string) {
	id := c.Params("id")
	if !buildRoute(c) {
		return id, ""
	}
	if id == "" {
		return "", ""
	}
	b, err := h.d.Store.GetBuild(c.UserContext(), id)
	if err != nil {
		return "", id
	}
	return b.DeploymentID, id
}

// ownerOf finds the owner of the deployment, build or API token a route names.
func (h *handlers) ownerOf(c *fiber.Ctx) (string, error) {
	ctx := c.UserContext()
	if id := c.Params("token"); id != "" {
		t, err := h.d.Auth.TokenByID(ctx, id)
		if err != nil {
			return "", err
		}
		return t.UserID, nil
	}
	id := c.Params("id")
	if buildRoute(c) {
		b, err := h.d.Store.GetBuild(ctx, id)
		if err != nil {
			return "", err
		}
		id = b.DeploymentID
	}
	d, err := h.d.Engine.Deployment(ctx, id)
	if err != nil {
		return "", err
	}
	return d.Owner, nil
}

func (h *handlers) record(c *fiber.Ctx, e audit.Event) {
	if h.d.Audit == nil {
		return
	}
	if e.ClientIP == "" {
		e.ClientIP = c.IP()
	}
	if err := h.d.Audit.Record(c.UserContext(), e); err != nil {
		h.log(c, "recording an audit event", err)
	}
}

func (h *handlers) log(_ *fiber.Ctx, what string, err error) {
	if h.d.Logger != nil {
		h.d.Logger.Error(what, "error", err)
	}
}

// recordResult records the outcome of a side-effecting call: the location of an error,
// never a value.
func (h *handlers) recordResult(c *fiber.Ctx, action string, err error) {
	deploymentID, buildID := h.subjectOf(c)
	e := audit.Event{Action: action, Result: audit.ResultOK, DeploymentID: deploymentID, BuildID: buildID}
	if id, ok := c.Locals("build").(string); ok {
		e.BuildID = id
	}
	if id, ok := c.Locals("deployment").(string); ok {
		e.DeploymentID = id
	}
	if s, ok := c.Locals("subject").(string); ok {
		e.Subject = s
	}
	var de *deploy.Error
	var dir *directory.Error
	var dn *denied
	var rf *refused
	switch {
	case err == nil:
	case errors.As(err, &dn):
		return // recorded by authorize
	case errors.As(err, &rf):
		e.Result, e.Reason = audit.ResultInvalid, rf.code
	case errors.As(err, &dir):
		e.Result, e.Reason = audit.ResultInvalid, dir.Code+" at /"+dir.Field
	case errors.As(err, &de):
		e.Result, e.Reason = audit.ResultInvalid, de.Code
		if de.Location != "" {
			e.Reason = de.Code + " at " + de.Location
		}
	case errors.Is(err, store.ErrNotFound):
		e.Result, e.Reason = audit.ResultInvalid, "not_found"
	default:
		e.Result, e.Reason = audit.ResultError, "internal"
	}
	h.record(c, e)
}

// LoginRequest signs in.
type LoginRequest struct {
	Name     string `json:"name"`
	Password string `json:"password"`
}

// Me is the signed-in user.
type Me struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Superuser bool   `json:"superuser"`
	// MustChangePassword: every other call of a session is refused until the password
	// is changed (PUT /me/password).
	MustChangePassword bool `json:"must_change_password"`
}

func meOf(u auth.User) Me {
	return Me{ID: u.ID, Name: u.Name, Superuser: u.Superuser, MustChangePassword: u.MustChangePassword}
}

// login signs in with a JSON body only, and not from a page of another site: either
// would let that page sign the visitor in as the attacker (a log-in CSRF), whose
// deployments the victim would then fill. The UI's log-in form has its own token.
func (h *handlers) login(c *fiber.Ctx) error {
	if !isJSON(c) {
		return errNotJSON
	}
	if crossSite(c) {
		h.record(c, audit.Event{Action: "user.login", Issuer: audit.IssuerPassword, Result: audit.ResultDenied, Reason: "cross-site"})
		return &denied{status: fiber.StatusForbidden, code: "cross_site", message: "sign in from a page of this host, or from a script: a page of another site may not sign you in"}
	}
	var req LoginRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil || req.Name == "" {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/name", Message: "send {\"name\": ..., \"password\": ...}"}
	}
	ctx := c.UserContext()
	u, err := h.d.Auth.Authenticate(ctx, req.Name, req.Password, c.IP())
	var limited *auth.RateLimitedError
	switch {
	case errors.As(err, &limited):
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(limited.RetryAfter/time.Second)))
		return &denied{status: fiber.StatusTooManyRequests, code: "rate_limited",
			message: fmt.Sprintf("too many failed sign-ins from this address: wait %s and try again", limited.RetryAfter)}
	case errors.Is(err, auth.ErrBadCredentials):
		return &denied{status: fiber.StatusUnauthorized, code: "unauthenticated", message: "wrong name or password"}
	case err != nil:
		return err
	}
	s, err := h.d.Auth.NewSession(ctx, u.ID)
	if err != nil {
		return err
	}
	c.Cookie(&fiber.Cookie{Name: SessionCookie, Value: s.ID, Path: "/", HTTPOnly: true, SameSite: "Lax",
		Secure: c.Protocol() == "https", Expires: s.ExpiresAt})
	return c.JSON(fiber.Map{"user": meOf(u), "csrf_token": s.CSRFToken})
}

func (h *handlers) logout(c *fiber.Ctx) error {
	if id := c.Cookies(SessionCookie); id != "" {
		if err := h.d.Auth.EndSession(c.UserContext(), id); err != nil {
			return err
		}
	}
	c.ClearCookie(SessionCookie)
	return c.SendStatus(fiber.StatusNoContent)
}

func (h *handlers) me(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	return c.JSON(meOf(cl.user))
}

// ChangePasswordRequest changes the caller's password.
type ChangePasswordRequest struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// changePassword sets the caller's own password; the caller's other sessions end, the
// one it came from stays, and API tokens stay (GET /tokens lists them to revoke).
func (h *handlers) changePassword(c *fiber.Ctx) error {
	var req ChangePasswordRequest
	if err := c.BodyParser(&req); err != nil {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: "send {\"current_password\": ..., \"new_password\": ...}"}
	}
	cl, _ := callerOf(c)
	keep := ""
	if cl.issuer == audit.IssuerSession {
		keep = c.Cookies(SessionCookie)
	}
	err := h.d.Auth.ChangePassword(c.UserContext(), cl.user.ID, req.CurrentPassword, req.NewPassword, keep, c.IP())
	var pe *auth.PasswordError
	var limited *auth.RateLimitedError
	switch {
	case errors.As(err, &limited):
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(limited.RetryAfter/time.Second)))
		return &denied{status: fiber.StatusTooManyRequests, code: "rate_limited",
			message: fmt.Sprintf("too many wrong current passwords from this address: wait %s and try again", limited.RetryAfter)}
	case errors.Is(err, auth.ErrWrongPassword):
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/current_password", Message: err.Error()}
	case errors.As(err, &pe):
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/new_password", Message: err.Error()}
	case err != nil:
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// TokenRequest makes an API token for scripts.
type TokenRequest struct {
	Name         string `json:"name"`
	LifetimeDays int    `json:"lifetime_days"`
}

// TokenAnswer shows a new token once.
type TokenAnswer struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Token is an API token as its owner sees it: never its value, which is not kept.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// LastUsedAt is when the token was last used, to the minute; null if never.
	LastUsedAt *time.Time `json:"last_used_at"`
}

func (h *handlers) tokensOf(c *fiber.Ctx, userID string) error {
	tokens, err := h.d.Auth.Tokens(c.UserContext(), userID)
	if err != nil {
		return err
	}
	out := make([]Token, 0, len(tokens))
	for _, t := range tokens {
		out = append(out, Token{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt})
	}
	return c.JSON(out)
}

func (h *handlers) listTokens(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	return h.tokensOf(c, cl.user.ID)
}

func (h *handlers) revokeToken(c *fiber.Ctx) error {
	if err := h.d.Auth.RevokeToken(c.UserContext(), c.Params("token")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (h *handlers) newToken(c *fiber.Ctx) error {
	var req TokenRequest
	if err := c.BodyParser(&req); err != nil || req.Name == "" {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/name", Message: "a token needs a name"}
	}
	if max := int(auth.MaxTokenLifetime / (24 * time.Hour)); req.LifetimeDays < 1 || req.LifetimeDays > max {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/lifetime_days", Message: fmt.Sprintf("a token lives 1 to %d days", max)}
	}
	cl, _ := callerOf(c)
	token, t, err := h.d.Auth.NewToken(c.UserContext(), cl.user.ID, req.Name, time.Duration(req.LifetimeDays)*24*time.Hour)
	var bad *input.Error
	if errors.As(err, &bad) {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/name", Message: bad.Error()}
	}
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(TokenAnswer{ID: t.ID, Name: t.Name, Token: token, ExpiresAt: t.ExpiresAt})
}

// AuditEvent is one event of the audit trail.
type AuditEvent struct {
	Seq          int64     `json:"seq"`
	Time         time.Time `json:"time"`
	Actor        string    `json:"actor,omitempty"`
	Issuer       string    `json:"issuer,omitempty"`
	Action       string    `json:"action"`
	DeploymentID string    `json:"deployment_id,omitempty"`
	BuildID      string    `json:"build_id,omitempty"`
	Subject      string    `json:"subject,omitempty"`
	RequestID    string    `json:"request_id,omitempty"`
	Result       string    `json:"result"`
	Reason       string    `json:"reason,omitempty"`
	Count        int       `json:"count"`
	PrevHash     string    `json:"prev_hash"`
	Hash         string    `json:"hash"`
}

// auditEvents lists the events after ?after= in order, at most ?limit=: of the user of(c)
// names (actor or subject), or every event when it names none. An account's events are
// read through their indexes, not by walking the whole trail.
func (h *handlers) auditEvents(of func(*fiber.Ctx) string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		from, err := queryInt(c, "after", 0, 0, math.MaxInt)
		if err != nil {
			return err
		}
		limit, err := queryInt(c, "limit", 200, 1, 1000)
		if err != nil {
			return err
		}
		var rows []store.AuditEvent
		if user := of(c); user == "" {
			rows, err = h.d.Store.AuditEvents(c.UserContext(), int64(from), limit)
		} else {
			rows, err = h.d.Store.UserAuditEventsAfter(c.UserContext(), user, int64(from), limit)
		}
		if err != nil {
			return err
		}
		out := make([]AuditEvent, 0, len(rows))
		for _, r := range rows {
			out = append(out, AuditEvent{Seq: r.Seq, Time: r.Time, Actor: r.Actor, Issuer: r.Issuer, Action: r.Action,
				DeploymentID: r.DeploymentID, BuildID: r.BuildID, Subject: r.Subject, RequestID: r.RequestID,
				Result: r.Result, Reason: r.Reason, Count: r.Count, PrevHash: r.PrevHash, Hash: r.Hash})
		}
		return c.JSON(out)
	}
}
