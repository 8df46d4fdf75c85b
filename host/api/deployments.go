package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

type handlers struct {
	d     Deps
	table []Rule
}

// routes registers every API route with its rule: this is the authorization table.
func (h *handlers) routes(r fiber.Router) {
	const get, post, put, del = fiber.MethodGet, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete
	h.route(r, post, "/login", Public, "", h.login)
	h.route(r, post, "/logout", Public, "session.end", h.logout)
	h.route(r, get, "/openapi.json", Public, "", openAPIHandler)
	h.route(r, get, "/me", Signed, "", h.me)
	h.route(r, get, "/me/audit-events", Signed, "", h.auditEvents(h.ownEvents))
	h.route(r, put, "/me/password", Signed, "user.change_password", h.changePassword)
	h.route(r, get, "/tokens", Signed, "", h.listTokens)
	h.route(r, post, "/tokens", Signed, "token.create", h.newToken)
	h.route(r, del, "/tokens/:token", Owner, "token.revoke", h.revokeToken)
	h.route(r, get, "/catalog", Signed, "", h.catalog)
	h.route(r, get, "/catalog/:app/schema", Signed, "", h.appSchema)
	h.route(r, get, "/schema", Signed, "", h.schema)
	h.route(r, get, "/schema/renames", Signed, "", h.renames)
	h.route(r, get, "/deployments", Signed, "", h.listDeployments)
	h.route(r, post, "/deployments", Signed, "deployment.create", h.createDeployment)
	h.route(r, get, "/deployments/:id", Owner, "", h.getDeployment)
	h.route(r, del, "/deployments/:id", Owner, "deployment.destroy", h.destroy)
	h.route(r, post, "/deployments/:id/submit", Owner, "deployment.submit", h.submit)
	h.route(r, post, "/deployments/:id/preview", Owner, "", h.preview)
	h.route(r, post, "/deployments/:id/suspend", Owner, "deployment.suspend", h.suspend)
	h.route(r, post, "/deployments/:id/resume", Owner, "deployment.resume", h.resume)
	h.route(r, get, "/deployments/:id/builds", Owner, "", h.listBuilds)
	h.route(r, put, "/deployments/:id/update-policy", Owner, "deployment.update_policy", h.updatePolicy)
	h.route(r, post, "/deployments/:id/operations/:name", Owner, "deployment.operation", h.operate)
	h.route(r, get, "/deployments/:id/backups", Owner, "", h.backups)
	h.route(r, get, "/deployments/:id/users", Owner, "", h.listDirectoryUsers)
	h.route(r, post, "/deployments/:id/users", Owner, "directory_user.add", h.addDirectoryUser)
	h.route(r, get, "/deployments/:id/groups", Owner, "", h.listDirectoryGroups)
	h.route(r, del, "/deployments/:id/users/:user", Owner, "directory_user.delete", h.deleteDirectoryUser())
	h.route(r, post, "/deployments/:id/users/:user/disable", Owner, "directory_user.disable", h.setDirectoryUserDisabled(true))
	h.route(r, post, "/deployments/:id/users/:user/enable", Owner, "directory_user.enable", h.setDirectoryUserDisabled(false))
	h.route(r, post, "/deployments/:id/users/:user/reset", Owner, "directory_user.reset", h.resetDirectoryUser())
	h.route(r, put, "/deployments/:id/users/:user/groups/:group", Owner, "directory_user.group_add", h.setDirectoryMembership(true))
	h.route(r, del, "/deployments/:id/users/:user/groups/:group", Owner, "directory_user.group_remove", h.setDirectoryMembership(false))
	r.Use("/password-links", passwordLinkLimit())
	h.route(r, post, "/password-links/use", Public, "directory_user.set_password", h.usePasswordLink)
	h.route(r, get, "/deployments/:id/operations", Owner, "", h.listOperations)
	h.route(r, post, "/deployments/:id/apps/:app/operations/:name", Owner, "deployment.run", h.startRun)
	h.route(r, get, "/deployments/:id/runs", Owner, "", h.listRuns)
	h.route(r, get, "/deployments/:id/runs/:run", Owner, "", h.getRun)
	h.route(r, get, "/deployments/:id/runs/:run/events", Owner, "", h.runEvents)
	h.route(r, get, "/deployments/:id/runs/:run/output", Owner, "", h.runOutput)
	h.route(r, post, "/deployments/:id/runs/:run/cancel", Owner, "deployment.run.cancel", h.cancelRun)
	h.route(r, post, "/deployments/:id/apps/:app/operations/:name/schedules", Owner, "deployment.schedule.create", h.addSchedule)
	h.route(r, get, "/deployments/:id/schedules", Owner, "", h.listSchedules)
	h.route(r, del, "/deployments/:id/schedules/:schedule", Owner, "deployment.schedule.delete", h.deleteSchedule)
	h.route(r, get, "/builds/:id", Owner, "", h.getBuild)
	h.route(r, get, "/builds/:id/events", Owner, "", h.buildEvents)
	h.route(r, get, "/plugins", Superuser, "", func(c *fiber.Ctx) error { return c.JSON(pluginList(h.d.Plugins)) })
	h.route(r, get, "/audit-events", Superuser, "", h.auditEvents(func(*fiber.Ctx) string { return "" }))
	h.route(r, get, "/users", Superuser, "", h.listUsers)
	h.route(r, post, "/users", Superuser, "user.create", h.createUser)
	h.route(r, del, "/users/:name", Superuser, "user.delete", h.accountChange("user.delete", true, h.deleteUser))
	h.route(r, get, "/users/:name/tokens", Superuser, "", h.userTokens)
	h.route(r, post, "/users/:name/disable", Superuser, "user.disable", h.accountChange("user.disable", true, h.setDisabled(true)))
	h.route(r, post, "/users/:name/enable", Superuser, "user.enable", h.accountChange("user.enable", false, h.setDisabled(false)))
	h.route(r, post, "/users/:name/promote", Superuser, "user.promote", h.accountChange("user.promote", false, h.promote))
	h.route(r, post, "/users/:name/demote", Superuser, "user.demote", h.accountChange("user.demote", true, h.demote))
	h.route(r, post, "/users/:name/reset-password", Superuser, "user.reset_password", h.accountChange("user.reset_password", true, h.resetPassword))
	h.route(r, get, "/jobs", Superuser, "", h.listJobs)
	h.route(r, post, "/jobs/:id/cancel", Superuser, "build.cancel", h.cancelJob)
	h.domainRoutes(r)
	h.exportRoutes(r)
	h.migrationRoutes(r)
}

// ownEvents keeps the events of the caller: what it did, and what was done to it.
func (h *handlers) ownEvents(c *fiber.Ctx) string {
	cl, _ := callerOf(c)
	return cl.user.ID
}

// CatalogApp is one app of the catalog.
type CatalogApp struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Summary string `json:"summary"`
	// Icon is a data: URL, empty when the app has none.
	Icon string `json:"icon,omitempty"`
}

func (h *handlers) catalog(c *fiber.Ctx) error {
	out := []CatalogApp{}
	for _, a := range h.d.Engine.Catalog().Apps() {
		item := CatalogApp{Name: a.Name, Version: a.Version, Summary: a.Summary}
		if len(a.Icon) > 0 {
			item.Icon = "data:" + a.IconMediaType + ";base64," + base64.StdEncoding.EncodeToString(a.Icon)
		}
		out = append(out, item)
	}
	return c.JSON(out)
}

func (h *handlers) appSchema(c *fiber.Ctx) error {
	a, ok := h.d.Engine.Catalog().App(c.Params("app"))
	if !ok {
		return &deploy.Error{Code: deploy.CodeNotFound, Message: "no app of that name in the catalog: GET /api/v1/catalog lists them"}
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(a.Schema)
}

func (h *handlers) schema(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(h.d.Engine.Catalog().Schema())
}

func (h *handlers) renames(c *fiber.Ctx) error {
	type rename struct {
		From  string `json:"from"`
		To    string `json:"to"`
		Since string `json:"since"`
	}
	out := map[string][]rename{}
	for _, a := range h.d.Engine.Catalog().Apps() {
		list := []rename{}
		for _, r := range a.Renames {
			list = append(list, rename{From: r.From, To: r.To, Since: r.Since})
		}
		out[a.Name] = list
	}
	return c.JSON(out)
}

// Deployment is a deployment as the API shows it.
type Deployment struct {
	ID        string          `json:"id"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Owner     string          `json:"owner"`
	Domain    string          `json:"domain"`
	State     string          `json:"state"`
	Config    json.RawMessage `json:"config"`
	// SecretsSet lists the JSON pointers of the secret options that hold a value.
	SecretsSet   []string            `json:"secrets_set,omitempty"`
	UpdatePolicy deploy.UpdatePolicy `json:"update_policy"`
	// CatalogRevision is the catalog revision the deployment runs; UpdateAvailable names
	// a newer one when there is one.
	CatalogRevision string    `json:"catalog_revision"`
	UpdateAvailable *Update   `json:"update_available,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	// Hosts maps each app with a host name (its x-hostname option) to its full host name.
	Hosts map[string]string `json:"hosts,omitempty"`
	// FrontDoor is how people reach the apps: URLs, certificates, the zone's records.
	FrontDoor *deploy.FrontDoorStatus `json:"front_door,omitempty"`
	// Nodes maps each node to its addresses (port name to host:port).
	Nodes map[string]map[string]string `json:"nodes,omitempty"`
	// Resources lists what the deployment holds at its providers.
	Resources []Resource `json:"resources,omitempty"`
	// Retained lists resources kept after a destroy, with the end of their grace period.
	Retained []Retained `json:"retained,omitempty"`
	// Backups says where the backups of each app with data stand.
	Backups   []deploy.BackupStatus `json:"backups,omitempty"`
	LastBuild *Build                `json:"last_build,omitempty"`
}

// Update is a newer catalog revision than the one a deployment runs.
type Update struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Resource is one resource a deployment holds.
type Resource struct {
	Name     string `json:"name"`
	App      string `json:"app"`
	Type     string `json:"type"`
	Provider string `json:"provider"`
	State    string `json:"state"`
}

// Retained is a resource kept for a grace period.
type Retained struct {
	Name  string    `json:"name"`
	Type  string    `json:"type"`
	Until time.Time `json:"until"`
}

func toDeployment(d store.Deployment) Deployment {
	out := Deployment{ID: d.ID, Namespace: d.Namespace, Name: d.Name, Owner: d.Owner, Domain: d.Domain, State: d.State, CatalogRevision: d.CatalogRevision,
		Config: json.RawMessage(d.Config), UpdatePolicy: deploy.PolicyOf(d), CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	refs := map[string]string{}
	if json.Unmarshal([]byte(d.SecretRefs), &refs) == nil {
		for pointer := range refs {
			out.SecretsSet = append(out.SecretsSet, pointer)
		}
		sort.Strings(out.SecretsSet)
	}
	return out
}

func (h *handlers) listDeployments(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	owner := cl.user.ID
	if cl.user.Superuser {
		owner = ""
	}
	limit, err := queryInt(c, "limit", defaultPage, 1, maxPage)
	if err != nil {
		return err
	}
	ds, err := h.d.Store.ListDeploymentSummaries(c.UserContext(), owner, c.Query("before"), limit)
	if err != nil {
		return err
	}
	out := make([]DeploymentSummary, len(ds))
	for i, d := range ds {
		out[i] = DeploymentSummary(d)
	}
	if len(ds) == limit {
		c.Set(NextPageHeader, ds[len(ds)-1].ID)
	}
	return c.JSON(out)
}

// queryInt is the query parameter name as a whole number from min to max, def when it
// is absent; anything else is refused, naming the parameter.
func queryInt(c *fiber.Ctx, name string, def, min, max int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/" + name,
			Message: fmt.Sprintf("the query parameter %s is a whole number from %d to %d", name, min, max)}
	}
	return n, nil
}

// Pages of the deployments list.
const (
	defaultPage = 50
	maxPage     = 500
	// NextPageHeader carries the `before` of the next page when there may be one.
	NextPageHeader = "X-Next-Before"
)

// DeploymentSummary is a deployment as the list shows it; GET /deployments/{id} has the rest.
type DeploymentSummary struct {
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`
	Domain    string    `json:"domain"`
	State     string    `json:"state"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CreateRequest creates a deployment.
type CreateRequest struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

func (h *handlers) createDeployment(c *fiber.Ctx) error {
	var req CreateRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: "the body is not a JSON object with name and namespace"}
	}
	cl, _ := callerOf(c)
	d, err := h.d.Engine.Create(c.UserContext(), cl.user.ID, req.Name, req.Namespace)
	if err != nil {
		return err
	}
	c.Locals("deployment", d.ID)
	return c.Status(fiber.StatusCreated).JSON(toDeployment(d))
}

func (h *handlers) getDeployment(c *fiber.Ctx) error {
	ctx := c.UserContext()
	d, err := h.d.Engine.Deployment(ctx, c.Params("id"))
	if err != nil {
		return err
	}
	out := toDeployment(d)
	if from, to, ok := h.d.Engine.UpdateAvailable(d); ok {
		out.UpdateAvailable = &Update{From: from, To: to}
	}
	rows, err := h.d.Store.Resources(ctx, d.ID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		out.Resources = append(out.Resources, Resource{Name: r.Name, App: r.App, Type: r.Type, Provider: r.Provider, State: r.State})
		switch {
		case r.Type == contract.Instance && r.State == store.ResourceProvisioned:
			var ir contract.InstanceResult
			if json.Unmarshal([]byte(r.Result), &ir) == nil {
				if out.Nodes == nil {
					out.Nodes = map[string]map[string]string{}
				}
				out.Nodes[r.Name] = ir.Addresses
			}
		case r.State == store.ResourceRetained && r.RetainUntil != nil:
			out.Retained = append(out.Retained, Retained{Name: r.Name, Type: r.Type, Until: *r.RetainUntil})
		}
	}
	if out.Hosts, err = h.d.Engine.HostNames(ctx, d); err != nil {
		return err
	}
	// The rows and the builds are read once: the front door and the backups are told
	// from them too.
	builds, err := h.d.Store.ListBuilds(ctx, d.ID, deploy.RecentBuilds)
	if err != nil {
		return err
	}
	fd, err := h.d.Engine.FrontDoorFrom(ctx, d, rows, builds)
	if err != nil {
		return err
	}
	if len(fd.Apps) > 0 {
		out.FrontDoor = &fd
	}
	if out.Backups, err = h.d.Engine.BackupStatusesFrom(ctx, d, rows); err != nil {
		return err
	}
	if len(builds) > 0 {
		b := toBuild(builds[0])
		out.LastBuild = &b
	}
	return c.JSON(out)
}

// Build is a build as the API shows it.
type Build struct {
	ID           string               `json:"id"`
	DeploymentID string               `json:"deployment_id"`
	Operation    string               `json:"operation"`
	State        string               `json:"state"`
	Reason       string               `json:"reason,omitempty"`
	CreatedAt    time.Time            `json:"created_at"`
	StartedAt    *time.Time           `json:"started_at,omitempty"`
	FinishedAt   *time.Time           `json:"finished_at,omitempty"`
	Events       []Event              `json:"events,omitempty"`
	Unmigrated   []catalog.Unmigrated `json:"unmigrated,omitempty"`
}

// Event is one line of a build's log.
type Event struct {
	Seq      int       `json:"seq"`
	Time     time.Time `json:"time"`
	Step     string    `json:"step"`
	Level    string    `json:"level"`
	Message  string    `json:"message"`
	Progress int       `json:"progress"`
}

func toBuild(b store.Build) Build {
	return Build{ID: b.ID, DeploymentID: b.DeploymentID, Operation: b.Operation, State: string(b.State), Reason: b.Reason,
		CreatedAt: b.CreatedAt, StartedAt: b.StartedAt, FinishedAt: b.FinishedAt}
}

func (h *handlers) submit(c *fiber.Ctx) error {
	b, unmigrated, err := h.d.Engine.SubmitWith(c.UserContext(), c.Params("id"), c.Body(),
		deploy.SubmitOptions{ApplyUpdates: c.QueryBool("apply_updates"), ClearSecrets: queryAll(c, "clear_secret")})
	if err != nil {
		return err
	}
	c.Locals("build", b.ID)
	out := toBuild(b)
	out.Unmigrated = unmigrated
	return c.Status(fiber.StatusAccepted).JSON(out)
}

func (h *handlers) preview(c *fiber.Ctx) error {
	p, err := h.d.Engine.Preview(c.UserContext(), c.Params("id"), c.Body())
	if err != nil {
		return err
	}
	return c.JSON(p)
}

func (h *handlers) suspend(c *fiber.Ctx) error {
	return h.accepted(c, h.d.Engine.Suspend)
}

func (h *handlers) resume(c *fiber.Ctx) error {
	return h.accepted(c, h.d.Engine.Resume)
}

func (h *handlers) destroy(c *fiber.Ctx) error {
	return h.accepted(c, h.d.Engine.Destroy)
}

func (h *handlers) accepted(c *fiber.Ctx, op func(ctx context.Context, id string) (store.Build, error)) error {
	b, err := op(c.UserContext(), c.Params("id"))
	if err != nil {
		return err
	}
	c.Locals("build", b.ID)
	return c.Status(fiber.StatusAccepted).JSON(toBuild(b))
}

func (h *handlers) listBuilds(c *fiber.Ctx) error {
	builds, err := h.d.Store.ListBuilds(c.UserContext(), c.Params("id"), 50)
	if err != nil {
		return err
	}
	out := make([]Build, 0, len(builds))
	for _, b := range builds {
		out = append(out, toBuild(b))
	}
	return c.JSON(out)
}

func (h *handlers) getBuild(c *fiber.Ctx) error {
	ctx := c.UserContext()
	b, err := h.d.Store.GetBuild(ctx, c.Params("id"))
	if err != nil {
		return err
	}
	events, err := h.d.Store.BuildEvents(ctx, b.ID)
	if err != nil {
		return err
	}
	out := toBuild(b)
	for _, e := range events {
		out.Events = append(out.Events, Event{Seq: e.Seq, Time: e.Time, Step: e.Step, Level: e.Level, Message: e.Message, Progress: e.Progress})
	}
	return c.JSON(out)
}

func (h *handlers) operate(c *fiber.Ctx) error {
	var op deploy.Operation
	if err := json.Unmarshal(c.Body(), &op); err != nil {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: "send {\"app\": ..., \"snapshot\": ...}"}
	}
	b, err := h.d.Engine.Operate(c.UserContext(), c.Params("id"), c.Params("name"), op)
	if err != nil {
		return err
	}
	c.Locals("build", b.ID)
	return c.Status(fiber.StatusAccepted).JSON(toBuild(b))
}

// Backup is one backup of an app.
type Backup struct {
	ID       string            `json:"id"`
	Time     time.Time         `json:"time"`
	Database string            `json:"database"`
	Tags     map[string]string `json:"tags"`
}

func (h *handlers) backups(c *fiber.Ctx) error {
	app := c.Query("app")
	if app == "" {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/app", Message: "name the app: ?app=miniflux"}
	}
	list, err := h.d.Engine.Backups(c.UserContext(), c.Params("id"), app)
	if err != nil {
		return err
	}
	out := make([]Backup, 0, len(list))
	for _, s := range list {
		out = append(out, Backup{ID: s.ID, Time: s.Time, Database: s.Database, Tags: s.Tags})
	}
	return c.JSON(out)
}

// queryAll is every value of a repeated query parameter.
func queryAll(c *fiber.Ctx, name string) []string {
	var out []string
	for _, v := range c.Context().QueryArgs().PeekMulti(name) {
		out = append(out, string(v))
	}
	return out
}
