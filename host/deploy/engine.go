package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
	"github.com/fedhost/fedhost/sdk/schema"
)

// Deployment states.
const (
	StateNew        = "new"
	StateDeploying  = "deploying"
	StateActive     = "active"
	StateFailed     = "failed"
	StateSuspended  = "suspended"
	StateDestroyed  = "destroyed"
	defaultMaxQueue = 64
)

// Options configure an Engine.
type Options struct {
	Store   *store.Store
	Plugins *plugins.Manager
	Catalog *catalog.Catalog
	// Environment says which provider answers each resource type.
	Environment []config.Resource
	Logger      hclog.Logger
	// MaxQueued bounds the builds queued or running across all deployments (64).
	MaxQueued int
	// BackupGrace is how long backup buckets outlive a destroy (30 days).
	BackupGrace time.Duration
	// Audit records what the engine does on its own (automatic updates).
	Audit *audit.Log
	// BackupPolicy gives an app's backup schedule and retention (DefaultBackupPolicy
	// when nil).
	BackupPolicy func(app string) BackupPolicy
	// BuildLogRetention is how long the logs of finished builds are kept; 0 keeps them.
	BuildLogRetention time.Duration
	// AuditRetention is how long audit events are kept; 0 keeps them.
	AuditRetention time.Duration
	// Clock tells the engine the time (time.Now when nil); tests inject one.
	Clock func() time.Time
	// FrontDoor is where the route provider serves the apps (frontdoor.go).
	FrontDoor FrontDoor
	// MaxDeploymentsPerOperator bounds the deployments, destroyed ones not counted, that
	// an operator who is not a superuser may hold; 0 sets no limit.
	MaxDeploymentsPerOperator int
	// DomainFollow is how long a build follows a registration the registry keeps pending
	// (2 min), reading it every DomainFollowInterval (10 s).
	DomainFollow, DomainFollowInterval time.Duration
	// DelegationResolver is the resolver (host:port) asked whether an operator's own
	// domain is delegated to the zone's nameservers; the system's when empty.
	DelegationResolver string
	// RoleSyncInterval is how long a successful sync of the apps' roles with the
	// directory holds before the scheduler's tick runs another (1 h); a failed one is
	// retried a minute later, then after twice as long at each failure in a row, up to it.
	RoleSyncInterval time.Duration
	// Registrars names the registrars fedhost.hcl configures (its registrar blocks): only
	// these are offered, asked and listed by the snapshot job, so that a driver installed
	// in the plugin directory with no block is left alone. Nil offers every registrar
	// plugin running.
	Registrars []string
	// DomainSnapshotEvery is how often each registrar's account is listed and its due
	// domains renewed (a day when 0).
	DomainSnapshotEvery time.Duration
}

// Engine runs submits and builds.
type Engine struct {
	opts  Options
	queue *queue.Queue
	log   hclog.Logger
	now   func() time.Time

	// runnable caches Unrunnable's verdict per app version.
	runnableMu sync.Mutex
	runnable   map[string]string

	// operations keeps each app version's operations (commandOperations).
	operationsMu sync.Mutex
	operations   map[string][]app.Operation

	// sweptAt is when the tick last swept for the apps without a backup record.
	sweepMu sync.Mutex
	sweptAt time.Time
}

// New returns an engine; give it its queue with SetQueue before submitting.
func New(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = defaultMaxQueue
	}
	if opts.BackupGrace <= 0 {
		opts.BackupGrace = 30 * 24 * time.Hour
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Engine{opts: opts, log: opts.Logger, now: opts.Clock}
}

// SetQueue connects the queue that runs the engine's builds (the queue needs the engine
// as its builder, so one of them is made first).
func (e *Engine) SetQueue(q *queue.Queue) { e.queue = q }

// Catalog is the catalog the engine validates against.
func (e *Engine) Catalog() *catalog.Catalog { return e.opts.Catalog }

// route returns the provider of a resource type in the environment.
func (e *Engine) route(typ string) (*resource.Client, string, error) {
	var name string
	for _, r := range e.opts.Environment {
		if r.Type == typ {
			name = r.Provider
		}
	}
	if name == "" {
		return nil, "", fmt.Errorf("the environment names no provider for resource type %q: add a resource %q block to fedhost.hcl", typ, typ)
	}
	p, ok := e.opts.Plugins.Find(sdk.KindResource, name, "")
	if !ok {
		return nil, name, fmt.Errorf("resource type %q: provider %q is not installed (no fedhost-resource-%s in the plugin directory)", typ, name, name)
	}
	serves := false
	for _, s := range p.Description().Serves {
		serves = serves || s == typ
	}
	if !serves {
		return nil, name, fmt.Errorf("resource type %q: provider %q serves %v", typ, name, p.Description().Serves)
	}
	c, err := p.Client()
	if err != nil {
		return nil, name, err
	}
	return c.Resource(), name, nil
}

// Create stores a new deployment of owner, refusing a name that is not plain text and
// an operator who holds MaxDeploymentsPerOperator deployments already (superusers, the
// hosting provider's own accounts, hold any number).
func (e *Engine) Create(ctx context.Context, owner, name, namespace string) (store.Deployment, error) {
	if name == "" {
		// The store checks the namespace.
		name = namespace
	} else if err := input.Text("name", name, input.MaxName); err != nil {
		return store.Deployment{}, refuse(CodeInvalidConfiguration, "/name", "the name %s", err.(*input.Error).Problem)
	}
	if err := e.underDeploymentLimit(ctx, owner); err != nil {
		return store.Deployment{}, err
	}
	d, err := e.opts.Store.CreateDeployment(ctx, store.Deployment{
		Namespace: namespace, Name: name, Owner: owner, State: StateNew,
		Config: "{}", SecretRefs: "{}", CatalogRevision: "",
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		return d, refuse(CodeConflict, "/namespace", "this namespace is taken by another deployment: choose another")
	case errors.Is(err, store.ErrInvalid):
		return d, refuse(CodeInvalidConfiguration, "/namespace", "use 1 to 24 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen")
	}
	return d, err
}

// underDeploymentLimit refuses a new deployment of an operator at the limit.
func (e *Engine) underDeploymentLimit(ctx context.Context, owner string) error {
	limit := e.opts.MaxDeploymentsPerOperator
	if limit <= 0 {
		return nil
	}
	u, err := e.opts.Store.UserByID(ctx, owner)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if u.Superuser {
		return nil
	}
	n, err := e.opts.Store.CountDeployments(ctx, owner, StateDestroyed)
	if err != nil {
		return err
	}
	if n >= int64(limit) {
		return refuse(CodeLimitReached, "", "you hold %d deployments, the most this host allows an operator: destroy one, or ask your hosting provider to raise max_deployments_per_operator", limit)
	}
	return nil
}

// Deployment returns a deployment.
func (e *Engine) Deployment(ctx context.Context, id string) (store.Deployment, error) {
	d, err := e.opts.Store.GetDeployment(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return d, refuse(CodeNotFound, "", "no such deployment: check its id (GET /api/v1/deployments lists yours)")
	}
	return d, err
}

// SubmitOptions change a submit.
type SubmitOptions struct {
	// ApplyUpdates builds from the newest catalog revision instead of the deployment's.
	ApplyUpdates bool
	// ClearSecrets are the pointers (/apps/<app>/options/...) of stored writeOnly values
	// to forget: the configuration then goes without them.
	ClearSecrets []string
}

// Submit validates a configuration and queues a build of it on the deployment's catalog
// revision (the newest for a deployment that has none yet). A refusal changes nothing.
func (e *Engine) Submit(ctx context.Context, deploymentID string, raw json.RawMessage) (store.Build, []catalog.Unmigrated, error) {
	return e.SubmitWith(ctx, deploymentID, raw, SubmitOptions{})
}

// SubmitWith is Submit with options.
func (e *Engine) SubmitWith(ctx context.Context, deploymentID string, raw json.RawMessage, opts SubmitOptions) (store.Build, []catalog.Unmigrated, error) {
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return store.Build{}, nil, err
	}
	if d.State == StateDestroyed {
		return store.Build{}, nil, refuse(CodeConflict, "", "deployment %s is destroyed", d.ID)
	}
	revision := e.revisionFor(d, opts.ApplyUpdates)
	cfg, refs, unmigrated, err := e.check(ctx, d, raw, revision, opts.ClearSecrets)
	if err != nil {
		return store.Build{}, unmigrated, err
	}
	b, err := e.enqueue(ctx, d, store.OperationDeploy, cfg, refs, revision)
	return b, unmigrated, err
}

// revisionFor is the revision a deploy builds: the deployment's, or the newest.
func (e *Engine) revisionFor(d store.Deployment, applyUpdates bool) string {
	if d.CatalogRevision == "" || applyUpdates {
		current, _ := e.opts.Catalog.Revision()
		return current
	}
	return d.CatalogRevision
}

// madeFor is the app versions d's stored configuration was made for: those of the
// revision it runs; none (unknown) for a deployment that has none yet.
func (e *Engine) madeFor(ctx context.Context, d store.Deployment) map[string]string {
	if d.CatalogRevision == "" {
		return nil
	}
	_, versions, err := e.revisionOf(ctx, d.CatalogRevision)
	if err != nil {
		return nil
	}
	return versions
}

// catalogAt is the catalog of the app versions of a revision ("" is the newest).
func (e *Engine) catalogAt(ctx context.Context, revision string) (*catalog.Catalog, error) {
	current, _ := e.opts.Catalog.Revision()
	if revision == "" || revision == current {
		return e.opts.Catalog, nil
	}
	_, versions, err := e.revisionOf(ctx, revision)
	if err != nil {
		return nil, err
	}
	cat, err := e.opts.Catalog.At(versions)
	if err != nil {
		return nil, refuse(CodeConflict, "", "this deployment runs catalog revision %s: %v", revision, err)
	}
	return cat, nil
}

// validate applies the renames of the revision's app versions to raw, fills in their
// schemas' defaults and validates the result against them. from is, by app, the version
// raw was made for (nil: unknown): a rename applies only from below its Since to at or
// above it. A required writeOnly value missing from raw is no problem when stored holds
// it (the operator leaves a stored secret empty to keep it). It returns stored with the
// same renames applied (catalog.RenameSecrets): the references to keep with the result.
func (e *Engine) validate(ctx context.Context, raw json.RawMessage, revision string, from, stored map[string]string) (json.RawMessage, map[string]string, []catalog.Unmigrated, error) {
	if len(raw) > input.MaxConfiguration {
		return nil, nil, nil, refuse(CodeInvalidConfiguration, "", "the configuration is larger than %d KiB, more than any app here needs: remove what it does not need", input.MaxConfiguration>>10)
	}
	cat, err := e.catalogAt(ctx, revision)
	if err != nil {
		return nil, nil, nil, err
	}
	migrated, unmigrated, err := cat.ApplyRenames(raw, from)
	if err != nil {
		return nil, nil, nil, refuse(CodeInvalidConfiguration, "", "the configuration is not a JSON object")
	}
	stored = cat.RenameSecrets(stored, from)
	filled, err := cat.WithDefaults(migrated)
	if err != nil {
		return nil, nil, nil, refuse(CodeInvalidConfiguration, "", "the configuration is not a JSON object")
	}
	var problems []schema.Problem
	reported := map[string]bool{}
	var doc map[string]any
	_ = json.Unmarshal(filled, &doc)
	for _, p := range cat.Check(filled) {
		// A stored secret left empty is there; one typed anew is judged like any value.
		if _, kept := stored[p.Location]; kept {
			if _, typed := catalog.GetPointer(doc, p.Location); !typed {
				continue
			}
		}
		problems = append(problems, p)
		reported[p.Location] = true
	}
	// An app's host name is the host's to judge too: a schema's pattern cannot see the
	// domain's length or the other apps' names.
	_, hostProblems := cat.HostNames(filled)
	for _, p := range hostProblems {
		if !reported[p.Location] {
			problems = append(problems, p)
		}
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Location < problems[j].Location })
	if len(problems) > 0 {
		return nil, nil, unmigrated, invalid(problems)
	}
	return filled, stored, unmigrated, nil
}

// check applies renames and defaults, validates against the schemas of the revision the
// build will run, forgets the stored secrets clear names, and moves the secrets the
// operator typed to the secret resource; it returns the configuration to store and the
// secrets' references.
func (e *Engine) check(ctx context.Context, d store.Deployment, raw json.RawMessage, revision string, clear []string) (json.RawMessage, map[string]string, []catalog.Unmigrated, error) {
	refs := e.storedRefs(d)
	for _, ptr := range clear {
		if _, imported := importInstances[ptr]; imported {
			// The import's own values: its builds delete them once used.
			return nil, nil, nil, refuse(CodeInvalidConfiguration, "/clear_secret", "clear_secret names %s, which keeps the import's pointers, not an option's secret: the build that restores the data (or confirms the import) deletes it; name the pointer of a writeOnly option (/apps/<app>/options/...)", ptr)
		}
		if _, ok := refs[ptr]; !ok {
			return nil, nil, nil, refuse(CodeInvalidConfiguration, boundedPointer(ptr), "no secret is stored here to clear: name the pointer of a writeOnly option that is set")
		}
		delete(refs, ptr)
	}
	migrated, refs, unmigrated, err := e.validate(ctx, raw, revision, e.madeFor(ctx, d), refs)
	if err != nil {
		return nil, nil, unmigrated, err
	}
	stored, refs, err := e.takeOperatorSecrets(ctx, d, migrated, refs, len(clear) > 0)
	if err != nil {
		return nil, nil, unmigrated, err
	}
	return stored, refs, unmigrated, nil
}

// enqueue stores a build and queues it, refusing a full queue or a second build.
func (e *Engine) enqueue(ctx context.Context, d store.Deployment, operation string, cfg json.RawMessage, refs map[string]string, revision string) (store.Build, error) {
	return e.enqueueSlot(ctx, d, operation, cfg, refs, revision, nil)
}

// enqueueSlot is enqueue for a scheduled backup that takes backup, its slot, with the
// build; it wraps store.ErrSlotTaken when another scheduler took it.
func (e *Engine) enqueueSlot(ctx context.Context, d store.Deployment, operation string, cfg json.RawMessage, refs map[string]string, revision string, backup *store.Slot) (store.Build, error) {
	if e.queue == nil {
		return store.Build{}, errors.New("the engine has no queue")
	}
	builds, err := e.opts.Store.ListBuilds(ctx, d.ID, 1)
	if err != nil {
		return store.Build{}, err
	}
	if len(builds) > 0 && !builds[0].State.Finished() {
		return store.Build{}, refuse(CodeConflict, "", "build %s of this deployment is %s: wait for it to finish", builds[0].ID, builds[0].State)
	}
	n, err := e.opts.Store.CountUnfinishedBuilds(ctx)
	if err != nil {
		return store.Build{}, err
	}
	if n >= int64(e.opts.MaxQueued) {
		return store.Build{}, refuse(CodeQueueFull, "", "%d builds are queued or running, the limit of this host: submit again later", n)
	}
	refsJSON, _ := json.Marshal(refs)
	domain := d.Domain
	if operation == store.OperationDeploy {
		if c, err := catalog.ParseConfig(cfg); err == nil {
			domain = c.Domain
		}
	}
	b, err := e.opts.Store.SubmitBuild(ctx, d.ID, operation, store.Submission{Config: string(cfg), SecretRefs: string(refsJSON), Domain: domain, Revision: revision, Backup: backup})
	if errors.Is(err, store.ErrConflict) {
		return store.Build{}, refuse(CodeConflict, "", "a build of this deployment is queued or running: wait for it to finish")
	}
	if errors.Is(err, store.ErrDomainTaken) {
		return store.Build{}, refuse(CodeConflict, "/domain", "the domain %s is taken: another deployment has it, or a domain under or above it; choose another domain", domain)
	}
	if err != nil {
		return store.Build{}, err
	}
	if err := e.queue.EnqueueBuild(ctx, b.ID); err != nil {
		reason := "could not be queued: " + err.Error()
		_ = e.opts.Store.SetBuildState(context.WithoutCancel(ctx), b.ID, store.BuildFailed, reason)
		return store.Build{}, fmt.Errorf("build %s %s", b.ID, reason)
	}
	return b, nil
}

// Suspend queues a build that stops the deployment's instances and keeps all its data.
func (e *Engine) Suspend(ctx context.Context, id string) (store.Build, error) {
	d, err := e.Deployment(ctx, id)
	if err != nil {
		return store.Build{}, err
	}
	return e.enqueue(ctx, d, store.OperationSuspend, json.RawMessage(d.Config), nil, d.CatalogRevision)
}

// Resume queues a build of the stored configuration.
func (e *Engine) Resume(ctx context.Context, id string) (store.Build, error) {
	d, err := e.Deployment(ctx, id)
	if err != nil {
		return store.Build{}, err
	}
	if d.State == StateDestroyed {
		return store.Build{}, refuse(CodeConflict, "", "deployment %s is destroyed", d.ID)
	}
	if err := e.beforeResume(ctx, d); err != nil {
		return store.Build{}, err
	}
	return e.enqueue(ctx, d, store.OperationDeploy, json.RawMessage(d.Config), e.storedRefs(d), e.revisionFor(d, false))
}

// Destroy queues a build that deprovisions everything in reverse order, keeping backup
// buckets for the grace period.
func (e *Engine) Destroy(ctx context.Context, id string) (store.Build, error) {
	d, err := e.Deployment(ctx, id)
	if err != nil {
		return store.Build{}, err
	}
	return e.enqueue(ctx, d, store.OperationDestroy, json.RawMessage(d.Config), nil, d.CatalogRevision)
}

func (e *Engine) storedRefs(d store.Deployment) map[string]string {
	refs := map[string]string{}
	if err := json.Unmarshal([]byte(d.SecretRefs), &refs); err != nil || refs == nil {
		return map[string]string{}
	}
	return refs
}

// FailLost marks failed the builds this process left running when it last ended (see
// queue.Config.ClientID); call it once at start.
func (e *Engine) FailLost(ctx context.Context) error {
	ids, err := e.queue.FailLost(ctx)
	if err != nil {
		return err
	}
	e.BuildsLost(ctx, ids)
	return nil
}

// BuildsLost records the deployments of builds failed as lost (with this process, or, on
// the leader, with a host not seen lately: queue.Config.Lost): a deployment whose lost
// build changed it (a deploy, suspend, destroy or export stopped halfway) is failed, and
// the next submit builds it again. A lost operation on an app's data (a backup, restore
// or drill) leaves the deployment as it is, as such a build's failure does, and a lost
// revoke-export leaves it exported: the tick queues it again.
func (e *Engine) BuildsLost(ctx context.Context, ids []string) {
	for _, id := range ids {
		b, err := e.opts.Store.GetBuild(ctx, id)
		if err != nil {
			e.log.Error("reading a lost build", "build_id", id, "error", err)
			continue
		}
		switch b.Operation {
		case store.OperationBackup, store.OperationRestore, store.OperationDrill, store.OperationRevokeExport:
		default:
			if err := e.opts.Store.UpdateDeployment(ctx, b.DeploymentID, map[string]any{"state": StateFailed}); err != nil {
				e.log.Error("recording a lost build's deployment as failed", "build_id", id, "deployment", b.DeploymentID, "error", err)
			}
		}
		e.log.Warn("build lost with its process, marked failed", "build_id", id, "operation", b.Operation)
	}
}

// typeRank orders provisioning: secret before the services that keep their secrets in
// it, instances last.
func typeRank(typ string) int {
	for i, t := range contract.Types {
		if t == typ {
			return i
		}
	}
	return len(contract.Types)
}
