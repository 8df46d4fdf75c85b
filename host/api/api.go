package api

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sort"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
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
	"build_timeout":                 fiber.StatusGatewayTimeout,
}

func errorHandler(c *fiber.Ctx, err error) error {
	body, status := Error{Code: "internal", Message: err.Error()}, fiber.StatusInternalServerError
	var de *deploy.Error
	var fe *fiber.Error
	var dn *denied
	var rf *refused
	switch {
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
		status = fe.Code
		switch status {
		case fiber.StatusNotFound:
			body.Code = deploy.CodeNotFound
		case fiber.StatusBadRequest:
			// fasthttp's reasons quote the request (a malformed multipart header line).
			body.Code = deploy.CodeInvalidConfiguration
			body.Message = "the request cannot be read: check its Content-Type and that the body is in that form"
		}
	}
	return c.Status(status).JSON(fiber.Map{"error": body})
}

// New returns the Fiber app of the API; Mount adds its routes to an app that also serves
// the UI.
func New(d Deps) *fiber.App {
	app := fiber.New(Config())
	Mount(app, d)
	return app
}

// Config is the Fiber configuration the API needs: its error answers.
func Config() fiber.Config {
	return fiber.Config{DisableStartupMessage: true, ErrorHandler: errorHandler, BodyLimit: 16 << 20}
}

// Mount adds /healthz and the /api/v1 routes to app and returns the authorization table.
func Mount(app *fiber.App, d Deps) []Rule {
	// A handler's panic answers its own request with 500 instead of ending the host, for
	// the UI's routes too, which are mounted after these.
	logger := d.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: func(c *fiber.Ctx, e any) {
		logger.Error("a handler panicked", "method", c.Method(), "route", c.Route().Path, "panic", fmt.Sprint(e), "stack", string(debug.Stack()))
	}}))
	app.Get("/healthz", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok", "version": d.Version})
	})
	h := &handlers{d: d}
	v1 := app.Group("/api/v1", requestid.New(), h.authenticate)
	h.routes(v1)
	v1.Use(func(c *fiber.Ctx) error {
		return fiber.NewError(fiber.StatusNotFound, "no such route: see GET /api/v1/openapi.json for the routes")
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
