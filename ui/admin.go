package ui

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/store"
)

// jobsShown is a page of the jobs page; an Older jobs link shows the next.
const jobsShown = 50

type operatorsData struct {
	Users []auth.User
	// Created and Password are the user just created and its password, shown once.
	Created      *auth.User
	Password     string
	Name, Failed string
	// Notice says what an account change did, ChangeFailed why it was refused; Reset and
	// ResetPassword are the user whose password was just reset and the new password,
	// shown once.
	Notice, ChangeFailed string
	Reset                string
	ResetPassword        string
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

// accountChanges are what the buttons of the Operators page do to an account: the
// audit action, whether a superuser may do it to its own account, the change, and what
// the page then says.
var accountChanges = map[string]struct {
	action string
	self   bool
	change func(svc *auth.Service, s *session, name string) error
	done   string
}{
	"disable": {"user.disable", false, func(svc *auth.Service, s *session, name string) error { return svc.SetDisabled(s.ctx, name, true) },
		"%s is disabled: its sessions ended and its API tokens are revoked."},
	"enable": {"user.enable", true, func(svc *auth.Service, s *session, name string) error { return svc.SetDisabled(s.ctx, name, false) },
		"%s is enabled again. Tokens revoked when it was disabled stay revoked."},
	"promote": {"user.promote", true, func(svc *auth.Service, s *session, name string) error { return svc.Promote(s.ctx, name) },
		"%s is a superuser."},
	"demote": {"user.demote", false, func(svc *auth.Service, s *session, name string) error { return svc.Demote(s.ctx, name) },
		"%s is an operator now."},
	"delete": {"user.delete", false, func(svc *auth.Service, s *session, name string) error { return svc.DeleteUser(s.ctx, name) },
		"%s is deleted, with its sessions and tokens."},
}

// changeOperator applies one of accountChanges, or a password reset, to the account the
// path names; auth records it.
func (u *UI) changeOperator(c *fiber.Ctx, s *session) error {
	what := c.Params("change")
	target, err := u.operator(s, c.Params("name"))
	if err != nil {
		return err
	}
	ch, known := accountChanges[what]
	if what == "reset-password" {
		ch.action = "user.reset_password"
	} else if !known {
		return store.ErrNotFound
	}
	if what == "delete" && c.FormValue("confirm") != target.Name {
		return u.showOperators(c, s, fiber.StatusBadRequest, operatorsData{ChangeFailed: "To delete " + target.Name + ", type its user name in the box next to the button."})
	}
	var password string
	switch {
	case !ch.self && target.ID == s.ID: // a reset of oneself too: the account page changes it
		err = u.d.Auth.Refuse(s.ctx, ch.action, target.Name, auth.ErrSelf)
	case what == "reset-password":
		password, err = u.d.Auth.ResetPassword(s.ctx, target.Name)
	default:
		err = ch.change(u.d.Auth, s, target.Name)
	}
	var owns *store.OwnsDeploymentsError
	switch {
	case errors.Is(err, auth.ErrSelf):
		return u.showOperators(c, s, fiber.StatusConflict, operatorsData{ChangeFailed: "You cannot do this to your own account: ask another superuser. To change your password, use your account page."})
	case errors.Is(err, store.ErrLastSuperuser):
		return u.showOperators(c, s, fiber.StatusConflict, operatorsData{ChangeFailed: target.Name + " is the last active superuser: make another operator a superuser first, so that somebody can still manage the accounts."})
	case errors.As(err, &owns):
		return u.showOperators(c, s, fiber.StatusConflict, operatorsData{ChangeFailed: fmt.Sprintf("%s owns %d deployments that are not destroyed: destroy them first, or ask %s to.", target.Name, owns.Count, target.Name)})
	case err != nil:
		return err
	case what == "reset-password":
		return u.showOperators(c, s, fiber.StatusOK, operatorsData{Reset: target.Name, ResetPassword: password})
	}
	return u.showOperators(c, s, fiber.StatusOK, operatorsData{Notice: fmt.Sprintf(ch.done, target.Name)})
}

// operator returns the account called name.
func (u *UI) operator(s *session, name string) (auth.User, error) {
	return u.d.Auth.UserNamed(s.ctx, name)
}

type operatorData struct {
	Operator auth.User
	Tokens   []auth.Token
	Notice   string
}

// operatorPage shows one account and its API tokens, each with a button to revoke it.
func (u *UI) operatorPage(c *fiber.Ctx, s *session) error {
	return u.showOperator(c, s, "")
}

func (u *UI) showOperator(c *fiber.Ctx, s *session, notice string) error {
	target, err := u.operator(s, c.Params("name"))
	if err != nil {
		return err
	}
	tokens, err := u.d.Auth.Tokens(s.ctx, target.ID)
	if err != nil {
		return err
	}
	return u.render(c, fiber.StatusOK, "admin_operator", u.view(s, target.Name, "operators", operatorData{Operator: target, Tokens: tokens, Notice: notice}))
}

// revokeOperatorToken revokes a token of the account the path names.
func (u *UI) revokeOperatorToken(c *fiber.Ctx, s *session) error {
	target, err := u.operator(s, c.Params("name"))
	if err != nil {
		return err
	}
	t, err := u.d.Auth.TokenByID(s.ctx, c.Params("token"))
	if err != nil {
		return err
	}
	if t.UserID != target.ID {
		return store.ErrNotFound
	}
	if err := u.d.Auth.RevokeToken(s.ctx, t.ID); err != nil {
		return err
	}
	return u.showOperator(c, s, "Token “"+t.Name+"” is revoked.")
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
	Deployment store.DeploymentSummary
}

// jobsPage is one page of the jobs; Next is the `before` of the next page.
type jobsPage struct {
	Rows []job
	Next string
}

func (u *UI) jobs(c *fiber.Ctx, s *session) error {
	return u.showJobs(c, s, fiber.StatusOK, "")
}

func (u *UI) showJobs(c *fiber.Ctx, s *session, status int, message string) error {
	builds, err := u.d.Store.ListBuildsBefore(s.ctx, c.Query("before"), jobsShown)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(builds))
	for _, b := range builds {
		ids = append(ids, b.DeploymentID)
	}
	// The deployments of the builds shown, not every deployment.
	byID, err := u.d.Store.DeploymentSummariesByID(s.ctx, ids)
	if err != nil {
		return err
	}
	page := jobsPage{Rows: make([]job, len(builds))}
	for i, b := range builds {
		page.Rows[i] = job{Build: b, Deployment: byID[b.DeploymentID]}
	}
	if len(builds) == jobsShown {
		page.Next = builds[len(builds)-1].ID
	}
	v := u.view(s, "Jobs", "jobs", page)
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
