package ui

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

type deploymentRow struct {
	store.DeploymentSummary
	OwnerName string
}

// deploymentsPage is one page of the list; Next is the `before` of the next page.
type deploymentsPage struct {
	Rows []deploymentRow
	Next string
}

const deploymentsPerPage = 50

func (u *UI) deployments(c *fiber.Ctx, s *session) error {
	owner := s.ID
	if s.Superuser {
		owner = ""
	}
	list, err := u.d.Store.ListDeploymentSummaries(s.ctx, owner, c.Query("before"), deploymentsPerPage)
	if err != nil {
		return err
	}
	names := map[string]string{}
	if s.Superuser {
		owners := make([]string, 0, len(list))
		for _, d := range list {
			owners = append(owners, d.Owner)
		}
		slices.Sort(owners)
		if names, err = u.d.Store.UserNames(s.ctx, slices.Compact(owners)); err != nil {
			return err
		}
	}
	page := deploymentsPage{Rows: make([]deploymentRow, len(list))}
	for i, d := range list {
		page.Rows[i] = deploymentRow{DeploymentSummary: d, OwnerName: names[d.Owner]}
	}
	if len(list) == deploymentsPerPage {
		page.Next = list[len(list)-1].ID
	}
	return u.render(c, fiber.StatusOK, "deployments", u.view(s, "Deployments", "deployments", page))
}

// userName is the name of the account with id: the session's own, or read.
func (u *UI) userName(s *session, id string) (string, error) {
	if id == s.ID {
		return s.Name, nil
	}
	x, err := u.d.Store.UserByID(s.ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil // an owner since deleted: the page shows none
	}
	return x.Name, err
}

type newDeploymentData struct {
	Namespace, Name string
	Errors          map[string]string
	// SuggestedDomain is the domain the configuration will offer, {namespace} in it
	// standing for the namespace; "" offers none.
	SuggestedDomain string
}

func (u *UI) newDeployment(c *fiber.Ctx, s *session) error {
	return u.render(c, fiber.StatusOK, "deployment_new", u.view(s, "New deployment", "deployments", newDeploymentData{SuggestedDomain: u.d.SuggestedDomain}))
}

func (u *UI) createDeployment(c *fiber.Ctx, s *session) error {
	data := newDeploymentData{Namespace: c.FormValue("namespace"), Name: c.FormValue("name")}
	d, err := u.d.Engine.Create(s.ctx, s.ID, data.Name, data.Namespace)
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: "deployment.create", DeploymentID: d.ID, Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	var de *deploy.Error
	if errors.As(err, &de) {
		v := u.view(s, "New deployment", "deployments", newDeploymentData{Namespace: data.Namespace, Name: data.Name,
			Errors: map[string]string{de.Location: de.Message}, SuggestedDomain: u.d.SuggestedDomain})
		if de.Location == "" {
			v.Error = de.Message
		}
		status := fiber.StatusBadRequest
		if de.Code == deploy.CodeConflict || de.Code == deploy.CodeLimitReached {
			status = fiber.StatusConflict
		}
		return u.render(c, status, "deployment_new", v)
	}
	if err != nil {
		return err
	}
	return c.Redirect("/deployments/"+d.ID, fiber.StatusSeeOther)
}

// node is an instance of a deployment with the addresses it answers at.
type node struct {
	Name, App, State string
	Addresses        []address
}

type address struct{ Port, HostPort string }

type deploymentData struct {
	D       store.Deployment
	Owner   string
	Nodes   []node
	Builds  []store.Build
	Running bool
	// Update names a newer catalog revision, "" when there is none.
	Update string
	// Backups is where the backups of each app with data stand, from the store alone;
	// BackupsError says why that could not be read.
	Backups      []deploy.BackupStatus
	BackupsError string
	// StaleHours is how old the last good backup of a stale app is at least.
	StaleHours int
	// FrontDoor is how people reach the apps; FrontDoorError says why it could not be read.
	FrontDoor      deploy.FrontDoorStatus
	FrontDoorError string
	// Operations are the enabled apps' operations, Runs the last runs of them;
	// OperationsError says why the operations could not be listed.
	Operations      []deploy.AppOperation
	OperationsError string
	Runs            []store.Run
}

func (u *UI) deployment(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	return u.showDeployment(c, s, d, fiber.StatusOK, "")
}

func (u *UI) showDeployment(c *fiber.Ctx, s *session, d store.Deployment, status int, message string) error {
	rows, err := u.d.Store.Resources(s.ctx, d.ID)
	if err != nil {
		return err
	}
	data := deploymentData{D: d, StaleHours: int(deploy.StaleAfter.Hours())}
	if _, to, ok := u.d.Engine.UpdateAvailable(d); ok {
		data.Update = to
	}
	for _, r := range rows {
		if r.Type != contract.Instance {
			continue
		}
		n := node{Name: r.Name, App: r.App, State: r.State}
		var ir contract.InstanceResult
		if json.Unmarshal([]byte(r.Result), &ir) == nil && r.State == store.ResourceProvisioned {
			// What the instance provider said at the last build: running once healthy.
			n.State = ir.State
			for port, hp := range ir.Addresses {
				n.Addresses = append(n.Addresses, address{Port: port, HostPort: hp})
			}
			sort.Slice(n.Addresses, func(i, j int) bool { return n.Addresses[i].Port < n.Addresses[j].Port })
		}
		data.Nodes = append(data.Nodes, n)
	}
	// The rows and the builds are read once: the front door and the backups are told
	// from them too.
	builds, err := u.d.Store.ListBuilds(s.ctx, d.ID, deploy.RecentBuilds)
	if err != nil {
		return err
	}
	data.Builds = builds[:min(len(builds), 5)]
	data.Running = len(data.Builds) > 0 && !data.Builds[0].State.Finished()
	if data.Backups, err = u.d.Engine.BackupStatusesFrom(s.ctx, d, rows); err != nil {
		data.BackupsError = err.Error()
	}
	if data.FrontDoor, err = u.d.Engine.FrontDoorFrom(s.ctx, d, rows, builds); err != nil {
		data.FrontDoorError = err.Error()
	}
	if data.Operations, err = u.d.Engine.OperationsOf(s.ctx, d); err != nil {
		data.OperationsError = err.Error()
	}
	if data.Runs, err = u.d.Store.ListRuns(s.ctx, d.ID, 10); err != nil {
		return err
	}
	if data.Owner, err = u.userName(s, d.Owner); err != nil {
		return err
	}
	v := u.view(s, d.Name, "deployments", data)
	v.Error = message
	return u.render(c, status, "deployment", v)
}

// operation is a button of the deployment page that queues a build.
func (u *UI) operation(action string, run func(*deploy.Engine, context.Context, string) (store.Build, error)) handler {
	return func(c *fiber.Ctx, s *session) error {
		d, err := u.ownDeployment(s, c.Params("id"), action)
		if err != nil {
			return err
		}
		b, err := run(u.d.Engine, s.ctx, d.ID)
		return u.queued(c, s, d, action, b, err, func(de *deploy.Error) error {
			return u.showDeployment(c, s, d, fiber.StatusConflict, de.Message)
		})
	}
}

// queued ends a call that queues a build of d: it records the outcome under action and
// sends the browser to the build's page, or shows the page refused gives for the engine's
// refusal.
func (u *UI) queued(c *fiber.Ctx, s *session, d store.Deployment, action string, b store.Build, err error, refused func(*deploy.Error) error) error {
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: action, DeploymentID: d.ID, BuildID: b.ID, Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	var de *deploy.Error
	if errors.As(err, &de) {
		return refused(de)
	}
	if err != nil {
		return err
	}
	return c.Redirect("/builds/"+b.ID, fiber.StatusSeeOther)
}

type historyData struct {
	D      store.Deployment
	Builds []store.Build
}

func (u *UI) history(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	builds, err := u.d.Store.ListBuilds(s.ctx, d.ID, 0)
	if err != nil {
		return err
	}
	return u.render(c, fiber.StatusOK, "builds", u.view(s, "History of "+d.Name, "deployments", historyData{D: d, Builds: builds}))
}

type policyData struct {
	D      store.Deployment
	Policy deploy.UpdatePolicy
	Errors map[string]string
	Saved  bool
}

func (u *UI) policyPage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	p := deploy.PolicyOf(d)
	if p.TimeZone == "" {
		p.TimeZone = "UTC" // what the engine stores for an empty one
	}
	data := policyData{D: d, Policy: p, Saved: c.Query("saved") != ""}
	return u.render(c, fiber.StatusOK, "policy", u.view(s, "Update policy of "+d.Name, "deployments", data))
}

func (u *UI) setPolicy(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.update_policy")
	if err != nil {
		return err
	}
	p := deploy.UpdatePolicy{Policy: c.FormValue("policy"), WindowStart: c.FormValue("window_start"), TimeZone: c.FormValue("time_zone")}
	errs := map[string]string{}
	if m := c.FormValue("window_minutes"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil {
			errs["/window_minutes"] = "give the window's length as a whole number of minutes, 15 to 1440"
		}
		p.WindowMinutes = n
	}
	if len(errs) == 0 {
		_, err = u.d.Engine.SetUpdatePolicy(s.ctx, d.ID, p)
		result, reason := resultOf(err)
		if rerr := u.record(s.ctx, audit.Event{Action: "deployment.update_policy", DeploymentID: d.ID, Result: result, Reason: reason}); rerr != nil {
			return errors.Join(err, rerr)
		}
		var de *deploy.Error
		switch {
		case errors.As(err, &de) && de.Code == deploy.CodeInvalidConfiguration:
			errs[de.Location] = de.Message
		case err != nil:
			return err
		default:
			return c.Redirect("/deployments/"+d.ID+"/policy?saved=1", fiber.StatusSeeOther)
		}
	}
	data := policyData{D: d, Policy: p, Errors: errs}
	return u.render(c, fiber.StatusBadRequest, "policy", u.view(s, "Update policy of "+d.Name, "deployments", data))
}
