package api

import (
	"errors"
	"sort"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
)

// Deps is what the API serves from.
type Deps struct {
	Plugins *plugins.Manager
	Engine  *deploy.Engine
	Store   *store.Store
	Version string
}

// Error is the body of every error answer.
type Error struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Location string `json:"location,omitempty"`
}

var statusOf = map[string]int{
	deploy.CodeInvalidConfiguration: fiber.StatusBadRequest,
	deploy.CodeNotFound:             fiber.StatusNotFound,
	deploy.CodeConflict:             fiber.StatusConflict,
	deploy.CodeQueueFull:            fiber.StatusConflict,
	"build_timeout":                 fiber.StatusGatewayTimeout,
}

func errorHandler(c *fiber.Ctx, err error) error {
	body, status := Error{Code: "internal", Message: err.Error()}, fiber.StatusInternalServerError
	var de *deploy.Error
	var fe *fiber.Error
	switch {
	case errors.As(err, &de):
		body = Error{Code: de.Code, Message: de.Message, Location: de.Location}
		status = statusOf[de.Code]
	case errors.Is(err, store.ErrNotFound):
		body.Code, status = deploy.CodeNotFound, fiber.StatusNotFound
	case errors.As(err, &fe):
		status = fe.Code
		switch status {
		case fiber.StatusNotFound:
			body.Code = deploy.CodeNotFound
		case fiber.StatusBadRequest:
			body.Code = deploy.CodeInvalidConfiguration
		}
	}
	return c.Status(status).JSON(fiber.Map{"error": body})
}

// New returns the Fiber app of the API.
func New(d Deps) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ErrorHandler: errorHandler, BodyLimit: 16 << 20})
	app.Get("/healthz", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok", "version": d.Version})
	})
	v1 := app.Group("/api/v1")
	v1.Get("/plugins", func(c *fiber.Ctx) error { return c.JSON(pluginList(d.Plugins)) })
	if d.Engine != nil {
		h := &handlers{d: d}
		h.routes(v1)
	}
	return app
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
