package ui

import (
	"errors"
	"sort"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
)

// jobsShown bounds the jobs page.
const jobsShown = 200

type operatorsData struct {
	Users []auth.User
	// Created and Password are the user just created and its password, shown once.
	Created      *auth.User
	Password     string
	Name, Failed string
}

func (u *UI) operators(c *fiber.Ctx, s *session) error {
	return u.showOperators(c, s, fiber.StatusOK, operatorsData{})
}

func (u *UI) showOperators(c *fiber.Ctx, s *session, status int, data operatorsData) error {
	users, err := u.d.Auth.Users(s.ctx)
	if err != nil {
		return err
	}
	data.Users = users
	return u.render(c, status, "admin_operators", u.view(s, "Operators", "operators", data))
}

// createOperator makes an account; auth records it.
func (u *UI) createOperator(c *fiber.Ctx, s *session) error {
	name := c.FormValue("name")
	user, password, err := u.d.Auth.CreateUser(s.ctx, name, c.FormValue("superuser") == "true")
	if err != nil {
		msg := err.Error()
		if errors.Is(err, store.ErrConflict) {
			msg = "This user name is taken: choose another."
		}
		return u.showOperators(c, s, fiber.StatusBadRequest, operatorsData{Name: name, Failed: msg})
	}
	return u.showOperators(c, s, fiber.StatusCreated, operatorsData{Created: &user, Password: password})
}

func (u *UI) pluginsPage(c *fiber.Ctx, s *session) error {
	var list []plugins.Status
	if u.d.Plugins != nil {
		for _, p := range u.d.Plugins.Plugins() {
			list = append(list, p.Status())
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Kind < list[j].Kind })
	return u.render(c, fiber.StatusOK, "admin_plugins", u.view(s, "Plugins", "plugins", list))
}

func (u *UI) catalogPage(c *fiber.Ctx, s *session) error {
	var apps []*catalog.App
	if cat := u.d.Engine.Catalog(); cat != nil {
		apps = cat.Apps()
	}
	return u.render(c, fiber.StatusOK, "admin_catalog", u.view(s, "Catalog", "catalog", apps))
}

type job struct {
	store.Build
	Deployment store.Deployment
}

func (u *UI) jobs(c *fiber.Ctx, s *session) error {
	return u.showJobs(c, s, fiber.StatusOK, "")
}

func (u *UI) showJobs(c *fiber.Ctx, s *session, status int, message string) error {
	builds, err := u.d.Store.ListAllBuilds(s.ctx, jobsShown)
	if err != nil {
		return err
	}
	deployments, err := u.d.Store.ListDeployments(s.ctx, "")
	if err != nil {
		return err
	}
	byID := make(map[string]store.Deployment, len(deployments))
	for _, d := range deployments {
		byID[d.ID] = d
	}
	list := make([]job, len(builds))
	for i, b := range builds {
		list[i] = job{Build: b, Deployment: byID[b.DeploymentID]}
	}
	v := u.view(s, "Jobs", "jobs", list)
	v.Error = message
	return u.render(c, status, "admin_jobs", v)
}

func (u *UI) cancelJob(c *fiber.Ctx, s *session) error {
	b, err := u.d.Store.GetBuild(s.ctx, c.Params("id"))
	if err != nil {
		return err
	}
	err = u.d.Engine.Cancel(s.ctx, b.ID)
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: "build.cancel", DeploymentID: b.DeploymentID, BuildID: b.ID, Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	var de *deploy.Error
	if errors.As(err, &de) {
		return u.showJobs(c, s, fiber.StatusConflict, de.Message)
	}
	if err != nil {
		return err
	}
	return c.Redirect("/admin/jobs", fiber.StatusSeeOther)
}
