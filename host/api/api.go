package api

import (
	"errors"
	"sort"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/plugins"
)

// Deps is what the API serves from.
type Deps struct {
	Plugins *plugins.Manager
	Version string
}

// Error is the body of every error answer.
type Error struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Location string `json:"location,omitempty"`
}

// New returns the Fiber app of the API.
func New(d Deps) *fiber.App {
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			code, status := "internal", fiber.StatusInternalServerError
			var fe *fiber.Error
			if errors.As(err, &fe) {
				status = fe.Code
				if status == fiber.StatusNotFound {
					code = "not_found"
				}
			}
			return c.Status(status).JSON(fiber.Map{"error": Error{Code: code, Message: err.Error()}})
		},
	})
	app.Get("/healthz", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok", "version": d.Version})
	})
	v1 := app.Group("/api/v1")
	v1.Get("/plugins", func(c *fiber.Ctx) error { return c.JSON(pluginList(d.Plugins)) })
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
