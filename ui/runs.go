package ui

import (
	"encoding/json"
	"errors"
	"html/template"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/ui/form"
)

// runAction is the audit action of a run asked for on the operation page, the API's.
const runAction = "deployment.run"

type operationData struct {
	D      store.Deployment
	Op     deploy.AppOperation
	Fields template.HTML
	// Runs are the operation's last runs, newest first; Schedules its schedules.
	Runs      []store.Run
	Schedules []store.RunSchedule
	// Cron is the cron line sent, shown again with a refusal; Zone the deployment's
	// time zone, in which it is read.
	Cron, Zone string
}

// operationOf finds an app's operation in the deployment; ok is false when there is none.
func (u *UI) operationOf(c *fiber.Ctx, s *session, d store.Deployment) (deploy.AppOperation, bool, error) {
	ops, err := u.d.Engine.OperationsOf(s.ctx, d)
	if err != nil {
		return deploy.AppOperation{}, false, err
	}
	i := slices.IndexFunc(ops, func(op deploy.AppOperation) bool { return op.App == c.Params("app") && op.Name == c.Params("name") })
	if i < 0 {
		return deploy.AppOperation{}, false, nil
	}
	return ops[i], true, nil
}

// inputSchema is an operation's input schema, an empty object for one that takes none.
func inputSchema(op deploy.AppOperation) json.RawMessage {
	if len(op.Input) == 0 {
		return json.RawMessage(`{"type": "object", "properties": {}}`)
	}
	return op.Input
}

// operationPage shows an operation's form, generated from its input schema by the
// configure form's renderer, its Run button and its last runs.
func (u *UI) operationPage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	op, ok, err := u.operationOf(c, s, d)
	if err != nil {
		return err
	}
	if !ok {
		return u.noOperation(c, s)
	}
	return u.showOperation(c, s, d, op, fiber.StatusOK, nil, nil, "")
}

func (u *UI) noOperation(c *fiber.Ctx, s *session) error {
	return u.refusal(c, s, fiber.StatusNotFound, "Not found",
		"This deployment has no enabled app with an operation of that name. Go back to the deployment and choose one from its Apps' operations section.")
}

func (u *UI) showOperation(c *fiber.Ctx, s *session, d store.Deployment, op deploy.AppOperation, status int, value json.RawMessage, errs map[string]string, message string) error {
	return u.showOperationWith(c, s, d, op, status, value, errs, message, "")
}

func (u *UI) showOperationWith(c *fiber.Ctx, s *session, d store.Deployment, op deploy.AppOperation, status int, value json.RawMessage, errs map[string]string, message, cron string) error {
	fields, err := form.Render(inputSchema(op), value, form.Options{Errors: errs, IDPrefix: "input-"})
	if err != nil {
		return err
	}
	runs, err := u.d.Store.ListRuns(s.ctx, d.ID, store.RunsKept)
	if err != nil {
		return err
	}
	runs = slices.DeleteFunc(runs, func(r store.Run) bool { return r.App != op.App || r.Operation != op.Name })
	schedules, err := u.d.Store.RunSchedules(s.ctx, d.ID)
	if err != nil {
		return err
	}
	schedules = slices.DeleteFunc(schedules, func(r store.RunSchedule) bool { return r.App != op.App || r.Operation != op.Name })
	zone := d.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	v := u.view(s, op.Title+" in "+d.Name, "deployments", operationData{D: d, Op: op, Fields: fields, Runs: runs, Schedules: schedules, Cron: cron, Zone: zone})
	v.Error = message
	return u.render(c, status, "operation", v)
}

// runOperation queues a run with the submitted form as its input and shows the run.
func (u *UI) runOperation(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), runAction)
	if err != nil {
		return err
	}
	op, ok, err := u.operationOf(c, s, d)
	if err != nil {
		return err
	}
	if !ok {
		return u.noOperation(c, s)
	}
	raw, err := form.Decode(inputSchema(op), formValues(c))
	var fe *form.Error
	if errors.As(err, &fe) {
		return u.showOperation(c, s, d, op, fiber.StatusBadRequest, withoutSecrets(op, raw), fe.Fields,
			"Some values could not be read; they are marked below. Correct them and run again.")
	}
	if err != nil {
		return err
	}
	if c.FormValue("action") == "schedule" {
		return u.addSchedule(c, s, d, op, raw)
	}
	r, err := u.d.Engine.StartRun(s.ctx, d.ID, deploy.RunRequest{App: op.App, Operation: op.Name, Input: raw, Actor: s.Name, Trigger: store.RunManual})
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: runAction, DeploymentID: d.ID, Subject: r.ID, Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	var de *deploy.Error
	if errors.As(err, &de) {
		return u.showOperation(c, s, d, op, statusOf(err), withoutSecrets(op, raw), refusedInput(de), "The input was not accepted: "+de.Message+".")
	}
	if err != nil {
		return err
	}
	return c.Redirect("/deployments/"+d.ID+"/runs/"+r.ID, fiber.StatusSeeOther)
}

// withoutSecrets drops the secret values from an input shown again: a refused form
// never sends a password back to the browser.
func withoutSecrets(op deploy.AppOperation, raw json.RawMessage) json.RawMessage {
	var doc map[string]any
	if json.Unmarshal(raw, &doc) != nil {
		return nil
	}
	var sch struct {
		Properties map[string]struct {
			WriteOnly bool `json:"writeOnly"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(op.Input, &sch)
	for name, p := range sch.Properties {
		if p.WriteOnly {
			delete(doc, name)
		}
	}
	b, _ := json.Marshal(doc)
	return b
}

type runData struct {
	D      store.Deployment
	R      store.Run
	Output []store.RunOutput
	// LastSeq is the seq of the last piece shown, where the live stream goes on.
	LastSeq int
}

// runPage shows a run, its output so far, and follows it live (run.js).
func (u *UI) runPage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	r, err := u.d.Store.GetRun(s.ctx, c.Params("run"))
	if err != nil || r.DeploymentID != d.ID {
		return u.refusal(c, s, fiber.StatusNotFound, "Not found", "This deployment has no such run: its history lists them.")
	}
	out, err := u.d.Store.RunOutputs(s.ctx, r.ID, 0, 5000)
	if err != nil {
		return err
	}
	data := runData{D: d, R: r, Output: out}
	if len(out) > 0 {
		data.LastSeq = out[len(out)-1].Seq
	}
	return u.render(c, fiber.StatusOK, "run", u.view(s, r.App+" "+r.Operation+" in "+d.Name, "deployments", data))
}

// cancelRun cancels a run from its page.
func (u *UI) cancelRun(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.run.cancel")
	if err != nil {
		return err
	}
	_, err = u.d.Engine.CancelRun(s.ctx, d.ID, c.Params("run"), s.Name)
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: "deployment.run.cancel", DeploymentID: d.ID, Subject: c.Params("run"), Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	if err != nil {
		return err
	}
	return c.Redirect("/deployments/"+d.ID+"/runs/"+c.Params("run"), fiber.StatusSeeOther)
}

// refusedInput turns an engine refusal into the marks of the operation's form.
func refusedInput(de *deploy.Error) map[string]string {
	errs := map[string]string{}
	for _, p := range de.Details {
		errs[strings.TrimPrefix(p.Location, "/input")] = p.Message
	}
	if len(errs) == 0 && de.Location != "" {
		errs[strings.TrimPrefix(de.Location, "/input")] = de.Message
	}
	return errs
}

// addSchedule stores a schedule of the operation with the form's input and cron line.
func (u *UI) addSchedule(c *fiber.Ctx, s *session, d store.Deployment, op deploy.AppOperation, raw json.RawMessage) error {
	cron := c.FormValue("cron")
	sc, err := u.d.Engine.AddSchedule(s.ctx, d.ID, deploy.ScheduleRequest{App: op.App, Operation: op.Name, Cron: cron, Input: raw, Actor: s.Name})
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: "deployment.schedule.create", DeploymentID: d.ID, Subject: sc.ID, Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	var de *deploy.Error
	if errors.As(err, &de) {
		return u.showOperationWith(c, s, d, op, statusOf(err), withoutSecrets(op, raw), refusedInput(de), "The schedule was not accepted: "+de.Message+".", cron)
	}
	if err != nil {
		return err
	}
	return c.Redirect("/deployments/"+d.ID+"/operations/"+op.App+"/"+op.Name+"#schedules", fiber.StatusSeeOther)
}

// deleteSchedule removes a schedule from its operation's page.
func (u *UI) deleteSchedule(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.schedule.delete")
	if err != nil {
		return err
	}
	err = u.d.Store.DeleteRunSchedule(s.ctx, d.ID, c.Params("schedule"))
	result, reason := resultOf(err)
	if rerr := u.record(s.ctx, audit.Event{Action: "deployment.schedule.delete", DeploymentID: d.ID, Subject: c.Params("schedule"), Result: result, Reason: reason}); rerr != nil {
		return errors.Join(err, rerr)
	}
	if err != nil {
		return err
	}
	return c.Redirect("/deployments/"+d.ID+"/operations/"+c.Params("app")+"/"+c.Params("name")+"#schedules", fiber.StatusSeeOther)
}
