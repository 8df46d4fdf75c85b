package ui

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

type exportData struct {
	D       store.Deployment
	Running bool
	// Target and Recipient are what the operator typed; Field is the input a refusal
	// was about.
	Target, Recipient string
	Field             string
	// Migration is the string, shown once, and ExpiresAt when it expires.
	Migration string
	ExpiresAt time.Time
	BuildID   string
	// Warning says what to check when the source URL is the request's address.
	Warning string
}

// exportPage asks for the target of an export: its URL, or its recipient.
func (u *UI) exportPage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	data := exportData{D: d}
	if data.Running, err = u.running(s.ctx, d.ID); err != nil {
		return err
	}
	return u.render(c, fiber.StatusOK, "export", u.view(s, "Export "+d.Name, "deployments", data))
}

// export runs the export and shows the migration string, once: the answer is not
// cached and the string is kept nowhere.
func (u *UI) export(c *fiber.Ctx, s *session) error {
	const action = "deployment.export"
	d, err := u.ownDeployment(s, c.Params("id"), action)
	if err != nil {
		return err
	}
	data := exportData{D: d, Target: c.FormValue("target"), Recipient: c.FormValue("recipient")}
	recipient := data.Recipient
	switch {
	case (data.Target == "") == (data.Recipient == ""):
		err = &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/target", Message: "give the target fedhost's URL or its recipient, one of them"}
	case data.Target != "":
		recipient, err = deploy.FetchRecipient(s.ctx, data.Target)
	}
	var x deploy.Exported
	if err == nil {
		base, set := u.publicBase(c)
		if !set {
			data.Warning = deploy.PublicURLWarning
		}
		x, err = u.d.Engine.Export(s.ctx, d.ID, recipient, base)
	}
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: action, DeploymentID: d.ID, BuildID: x.Build.ID, Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	var de *deploy.Error
	if errors.As(err, &de) {
		data.Field = de.Location
		if data.Running, err = u.running(s.ctx, d.ID); err != nil {
			return err
		}
		v := u.view(s, "Export "+d.Name, "deployments", data)
		v.Error = de.Message
		return u.render(c, fiber.StatusConflict, "export", v)
	}
	if err != nil {
		return err
	}
	data.Migration, data.ExpiresAt, data.BuildID = x.String, x.ExpiresAt, x.Build.ID
	c.Set(fiber.HeaderCacheControl, "no-store")
	return u.render(c, fiber.StatusOK, "export", u.view(s, "Exported "+d.Name, "deployments", data))
}
