package api

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/headers"
	"github.com/fedhost/fedhost/host/metrics"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/host/tfstate"
	"github.com/fedhost/fedhost/sdk/schema"
)

// Deps is what the API serves from.
type Deps struct {
	Plugins *plugins.Manager
	Engine  *deploy.Engine
	Store   *store.Store
	Auth    *auth.Service
	Audit   *audit.Log
	Logger  hclog.Logger
	Version string
	// Metrics, when set, counts every request and serves GET /metrics: to loopback
	// peers only with MetricsToken "", else to requests bearing MetricsToken.
	Metrics      *metrics.Metrics
	MetricsToken string
	// PasswordLinkTTL is how long an invitation or reset link of a deployment's user
	// works (directory.DefaultLinkTTL when 0).
	PasswordLinkTTL time.Duration
	// TerraformState, when set, serves the terraform provider's state backend
	// (/api/v1/terraform/state/{tenant}/{instance}); without it those routes answer 404.
	TerraformState *tfstate.Keys
	// Migration, when set, is this fedhost's migration key: it serves
	// GET /api/v1/migration/recipient and opens the strings POST
	// /api/v1/deployments/import takes; without it those routes answer 404.
	Migration *migration.Keys
	// PublicURL is the address this fedhost is reached at (fedhost.hcl's public_url,
	// without a trailing slash): the source URL of migration strings and the base of
	// mailed links. "" takes each request's own address.
	PublicURL string
}

// publicBase is the base of the URLs this fedhost hands out: PublicURL, or the request's
// address when it is not set (set says which).
func (d Deps) publicBase(c *fiber.Ctx) (base string, set bool) {
	if d.PublicURL != "" {
		return d.PublicURL, true
	}
	return c.BaseURL(), false
}

func (d Deps) links() directory.Links {
	return directory.Links{Store: d.Store, TTL: d.PasswordLinkTTL}
}

// statusOfDirectory maps the directory's refusals to HTTP statuses.
var statusOfDirectory = map[string]int{
	directory.CodeInvalid:  fiber.StatusBadRequest,
	directory.CodeConflict: fiber.StatusConflict,
	directory.CodeNotFound: fiber.StatusNotFound,
}

// Error is the body of every error answer.
type Error struct {
	Code     string           `json:"code"`
	Message  string           `json:"message"`
	Location string           `json:"location,omitempty"`
	Details  []schema.Problem `json:"details,omitempty"`
}

var statusOf = map[string]int{
	deploy.CodeInvalidConfiguration: fiber.StatusBadRequest,
	deploy.CodeNotFound:             fiber.StatusNotFound,
	deploy.CodeConflict:             fiber.StatusConflict,
	deploy.CodeQueueFull:            fiber.StatusConflict,
	deploy.CodeUnavailable:          fiber.StatusServiceUnavailable,
	deploy.CodeLimitReached:         fiber.StatusConflict,
	"build_timeout":                 fiber.StatusGatewayTimeout,
}

func errorHandler(c *fiber.Ctx, err error) error {
	headers.Set(c, headers.DataCSP)
	body, status := Error{Code: "internal", Message: err.Error()}, fiber.StatusInternalServerError
	var de *deploy.Error
	var fe *fiber.Error
	var dn *denied
	var rf *refused
	var dir *directory.Error
	switch {
	case errors.As(err, &dir):
		body, status = Error{Code: dir.Code, Message: dir.Message, Location: "/" + dir.Field}, statusOfDirectory[dir.Code]
	case errors.As(err, &dn):
		body, status = Error{Code: dn.code, Message: dn.message}, dn.status
	case errors.As(err, &rf):
		body, status = Error{Code: rf.code, Message: rf.message}, rf.status
	case errors.As(err, &de):
		body = Error{Code: de.Code, Message: de.Message, Location: de.Location, Details: de.Details}
		status = statusOf[de.Code]
	case errors.Is(err, store.ErrNotFound):
		body.Code, status = deploy.CodeNotFound, fiber.StatusNotFound
	case errors.As(err, &fe):
		// Fiber's and fasthttp's messages may quote the request: the answer says its own.
		status = fe.Code
		body = httpError(status)
	}
	return c.Status(status).JSON(fiber.Map{"error": body})
}

// httpError is the answer to a request refused by HTTP itself, before any handler: a
// code for every status, and what to do.
func httpError(status int) Error {
	switch status {
	case fiber.StatusBadRequest:
		return Error{Code: "bad_request", Message: "this is not an HTTP request fedhost can read: check the request line, headers and body"}
	case fiber.StatusNotFound:
		return Error{Code: deploy.CodeNotFound, Message: "no such route: GET /api/v1/openapi.json lists them"}
	case fiber.StatusMethodNotAllowed:
		return Error{Code: "method_not_allowed", Message: "this route does not take this method: GET /api/v1/openapi.json lists them"}
	case fiber.StatusRequestTimeout:
		return Error{Code: "request_timeout", Message: "the request was not received in time: send it again, whole"}
	case fiber.StatusRequestEntityTooLarge:
		return Error{Code: "body_too_large", Message: "the request body is larger than this route takes: send a smaller one"}
	case fiber.StatusRequestHeaderFieldsTooLarge:
		return Error{Code: "headers_too_large", Message: "the request line or headers are too large: send shorter ones"}
	case fiber.StatusUnsupportedMediaType:
		return Error{Code: "unsupported_media_type", Message: "send the body as application/json"}
	case fiber.StatusTooManyRequests:
		return Error{Code: "rate_limited", Message: "too many requests: wait and try again"}
	}
	if status >= 400 && status < 500 {
		return Error{Code: "bad_request", Message: utils.StatusMessage(status) + ": check the request against GET /api/v1/openapi.json"}
	}
	return Error{Code: "internal", Message: "fedhost could not answer: try again; if it keeps failing, tell your hosting provider"}
}

// Server is how the HTTP server treats its connections.
type Server struct {
	// ReadTimeout bounds reading a request, headers and body; IdleTimeout how long a
	// kept-alive connection may wait for its next request; WriteTimeout writing an
	// answer (an event stream extends it at each write: see buildEvents).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// TrustedProxies are the addresses (IPs or CIDRs) whose X-Forwarded-Proto and
	// X-Real-IP headers are believed; none by default.
	TrustedProxies []string
}

// DefaultServer is the server of the embedded default and of tests.
var DefaultServer = Server{ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second}

// Config is the Fiber configuration the API needs: its error answers, the largest body
// a route takes (each route takes less but an import: see route),
// the timeouts and trusted proxies of s.
func Config(s Server) fiber.Config {
	return fiber.Config{
		DisableStartupMessage: true, ErrorHandler: errorHandler, BodyLimit: importBody,
		ReadTimeout: s.ReadTimeout, WriteTimeout: s.WriteTimeout, IdleTimeout: s.IdleTimeout,
		// With the check on and no proxies listed, no client's forwarding headers count.
		EnableTrustedProxyCheck: true, TrustedProxies: s.TrustedProxies,
		ProxyHeader: "X-Real-IP", EnableIPValidation: true,
		RequestMethods: append(slices.Clone(fiber.DefaultMethods), MethodLock, MethodUnlock),
	}
}

// Mount adds /healthz and the /api/v1 routes to app, made with Config, which may also
// serve the UI, and returns the authorization table.
func Mount(app *fiber.App, d Deps) []Rule {
	// A handler's panic answers its own request with 500 instead of ending the host, for
	// the UI's routes too, which are mounted after these.
	logger := d.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if d.Metrics != nil {
		// First: it sees the status of every answer, a recovered panic's too.
		app.Use(d.Metrics.Middleware())
	}
	app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: func(c *fiber.Ctx, e any) {
		logger.Error("a handler panicked", "method", c.Method(), "route", c.Route().Path, "panic", fmt.Sprint(e), "stack", string(debug.Stack()))
	}}))
	app.Get("/healthz", headers.Middleware(headers.DataCSP), func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok", "version": d.Version})
	})
	mountMetrics(app, d)
	mountTerraformState(app, d)
	h := &handlers{d: d}
	v1 := app.Group("/api/v1", headers.Middleware(headers.DataCSP), requestid.New(), h.authenticate)
	h.routes(v1)
	v1.Use(func(c *fiber.Ctx) error {
		return fiber.ErrNotFound
	})
	return h.table
}

// Plugin is one plugin as the API shows it.
type Plugin struct {
	Name     string   `json:"name"`
	Kind     string   `json:"kind"`
	Version  string   `json:"version"`
	Protocol int      `json:"protocol"`
	Serves   []string `json:"serves"`
	State    string   `json:"state"`
	Restarts int      `json:"restarts"`
	Error    string   `json:"error,omitempty"`
}

func pluginList(m *plugins.Manager) []Plugin {
	out := []Plugin{}
	for _, p := range m.Plugins() {
		st := p.Status()
		item := Plugin{
			Name: st.Name, Kind: string(st.Kind), Version: st.Description.Version,
			Protocol: st.Description.Protocol, Serves: st.Description.Serves,
			State: string(st.State), Restarts: st.Restarts,
		}
		if st.Err != nil {
			item.Error = st.Err.Error()
		}
		out = append(out, item)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
