package ui

import (
	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
)

type buildData struct {
	B        store.Build
	D        store.Deployment
	Events   []store.BuildEvent
	Progress int
	LastSeq  int
}

// build shows a build's log so far; build.js follows the rest from the event stream.
func (u *UI) build(c *fiber.Ctx, s *session) error {
	b, err := u.d.Store.GetBuild(s.ctx, c.Params("id"))
	if err != nil {
		return err
	}
	d, err := u.ownDeploymentFor(s, b.DeploymentID, audit.Event{Action: "build.read", BuildID: b.ID})
	if err != nil {
		return err
	}
	events, err := u.d.Store.BuildEvents(s.ctx, b.ID)
	if err != nil {
		return err
	}
	data := buildData{B: b, D: d, Events: events}
	if n := len(events); n > 0 {
		data.Progress, data.LastSeq = events[n-1].Progress, events[n-1].Seq
	}
	if b.State == store.BuildSucceeded {
		data.Progress = 100
	}
	return u.render(c, fiber.StatusOK, "build", u.view(s, "Build "+short(b.ID)+" of "+d.Name, "deployments", data))
}

// short is enough of an id to tell builds apart on a page: its end, since ids that begin
// with their time share their first characters.
func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}
