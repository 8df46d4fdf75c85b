package ui

import (
	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

type destroyData struct {
	D store.Deployment
	// Removed and Kept list the resources a destroy removes and keeps (backups buckets
	// and their key, for the grace period).
	Removed, Kept []store.Resource
	Running       bool
	// Typed is what the operator typed; Mismatch is set when it is not the namespace.
	Typed    string
	Mismatch bool
}

// destroyPage asks the operator to confirm a destroy by typing the deployment's
// namespace: a destroy deletes every database and file of its apps.
func (u *UI) destroyPage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	data, err := u.destroyData(s, d)
	if err != nil {
		return err
	}
	return u.render(c, fiber.StatusOK, "destroy", u.view(s, "Destroy "+d.Name, "deployments", data))
}

func (u *UI) destroyData(s *session, d store.Deployment) (destroyData, error) {
	data := destroyData{D: d}
	rows, err := u.d.Store.Resources(s.ctx, d.ID)
	if err != nil {
		return data, err
	}
	for _, r := range rows {
		switch {
		case r.State == store.ResourceRetained:
		case deploy.KeptAfterDestroy(r):
			data.Kept = append(data.Kept, r)
		default:
			data.Removed = append(data.Removed, r)
		}
	}
	data.Running, err = u.running(s.ctx, d.ID)
	return data, err
}

// destroy queues the destroy once the form carries the deployment's namespace.
func (u *UI) destroy(c *fiber.Ctx, s *session) error {
	const action = "deployment.destroy"
	d, err := u.ownDeployment(s, c.Params("id"), action)
	if err != nil {
		return err
	}
	if typed := c.FormValue("confirm"); typed != d.Namespace {
		if err := u.record(s.ctx, audit.Event{Action: action, DeploymentID: d.ID, Result: audit.ResultInvalid, Reason: "/confirm"}); err != nil {
			return err
		}
		data, err := u.destroyData(s, d)
		if err != nil {
			return err
		}
		data.Typed, data.Mismatch = typed, true
		return u.render(c, fiber.StatusBadRequest, "destroy", u.view(s, "Destroy "+d.Name, "deployments", data))
	}
	b, err := u.d.Engine.Destroy(s.ctx, d.ID)
	return u.queued(c, s, d, action, b, err, func(de *deploy.Error) error {
		return u.showDeployment(c, s, d, fiber.StatusConflict, de.Message)
	})
}
