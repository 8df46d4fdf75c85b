package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/scheduler"
	"github.com/fedhost/fedhost/sdk"
)

// importPointer is where, among a deployment's secret references, the pointers of an
// import wait for its first build: a pointer outside the configuration, so that no app
// option ever takes it, kept by every submit until the build that restores deletes it
// (in a secret instance of its own: importInstances).
const importPointer = "/migration"

// ImportRequest is an import of a migration string that Keys.Open accepted.
type ImportRequest struct {
	Payload migration.Payload
	// Owner is the caller; Name and Namespace, when set, replace the source's.
	Owner, Name, Namespace string
	// Preview answers what would be made and stores nothing.
	Preview bool
}

// ImportedApp is an app the import brings, at the version it ran at the source and the
// one it will run here.
type ImportedApp struct {
	App  string `json:"app"`
	From string `json:"from"`
	To   string `json:"to"`
	// Data says the app's data is restored from the source's final snapshot.
	Data bool `json:"data"`
}

// ImportedRename is an option the target's catalog renamed, moved in the configuration.
type ImportedRename struct {
	App  string `json:"app"`
	From string `json:"from"`
	To   string `json:"to"`
}

// ImportedDomain is what becomes of the domain: "transfer" (the auth code goes to
// Registrar), "delegate" (the operator points the domain's nameservers here) or "none".
type ImportedDomain struct {
	Name      string `json:"name,omitempty"`
	Action    string `json:"action"`
	Registrar string `json:"registrar,omitempty"`
}

// ImportPlan is what an import makes (Preview) or made.
type ImportPlan struct {
	Migration  string               `json:"migration"`
	Source     string               `json:"source"`
	Name       string               `json:"name"`
	Namespace  string               `json:"namespace"`
	Apps       []ImportedApp        `json:"apps"`
	Renames    []ImportedRename     `json:"renames"`
	Unmigrated []catalog.Unmigrated `json:"unmigrated,omitempty"`
	Users      int                  `json:"users"`
	Groups     int                  `json:"groups"`
	Domain     ImportedDomain       `json:"domain"`
	Deployment string               `json:"deployment,omitempty"`
	Build      string               `json:"build,omitempty"`
	// config is the configuration to store: secrets in place, renames applied.
	config json.RawMessage
}

// Pending is what an import's first build needs from the string, kept in the secret
// resource until used: per app its snapshot, the directory and the domain's auth code,
// and how to confirm to the source.
type Pending struct {
	ID           string                       `json:"id"`
	SourceURL    string                       `json:"source_url"`
	ConfirmToken string                       `json:"confirm_token"`
	Apps         map[string]migration.AppData `json:"apps,omitempty"`
	Directory    *migration.Directory         `json:"directory,omitempty"`
	Domain       migration.Domain             `json:"domain"`
}

// Import checks a migration string's payload against this host before anything is
// stored: every app it names must be in the catalog at a version its guard lets the
// source's version update to, the configuration (the catalog's renames applied, the
// secrets put back) must pass the schemas of the versions it will run, and the namespace
// and domain must be free. With Preview it answers the plan; else it creates the
// deployment, keeps the configuration's secrets and the import's pointers in the secret
// resource, and queues the first build.
func (e *Engine) Import(ctx context.Context, req ImportRequest) (ImportPlan, error) {
	p := req.Payload
	plan := ImportPlan{Migration: p.ID, Source: bounded(p.Source.URL, 256), Name: p.Deployment.Name, Namespace: p.Deployment.Namespace,
		Apps: []ImportedApp{}, Renames: []ImportedRename{}}
	if req.Name != "" {
		plan.Name = req.Name
	}
	if req.Namespace != "" {
		plan.Namespace = req.Namespace
	}
	if plan.Name == "" {
		plan.Name = plan.Namespace
	}
	if err := e.importVersions(ctx, p, &plan); err != nil {
		return ImportPlan{}, err
	}
	if err := e.importConfig(ctx, p, &plan); err != nil {
		return ImportPlan{}, err
	}
	if d := p.Directory; d != nil {
		plan.Users, plan.Groups = len(d.Users), len(d.Groups)
	}
	taken, err := e.opts.Store.NamespaceTaken(ctx, plan.Namespace)
	if err != nil {
		return ImportPlan{}, err
	}
	if taken {
		return ImportPlan{}, refuse(CodeConflict, "/namespace", "a deployment of this host has the namespace %s: import with another (\"namespace\")", plan.Namespace)
	}
	cfg, err := catalog.ParseConfig(plan.config)
	if err != nil {
		return ImportPlan{}, err
	}
	plan.Domain = ImportedDomain{Name: cfg.Domain, Action: "none"}
	if cfg.Domain != "" {
		taken, err := e.opts.Store.DomainTaken(ctx, cfg.Domain)
		if err != nil {
			return ImportPlan{}, err
		}
		if taken {
			return ImportPlan{}, refuse(CodeConflict, "/domain", "another deployment of this host has the domain %s, or one under or above it: destroy that one first", cfg.Domain)
		}
		plan.Domain.Action = "delegate"
		if registrars := e.Registrars(); p.Domain.AuthCode != "" && len(registrars) > 0 {
			sort.Strings(registrars)
			plan.Domain.Action, plan.Domain.Registrar = "transfer", registrars[0]
		}
	}
	if req.Preview {
		return plan, nil
	}
	return e.storeImport(ctx, req, p, plan)
}

// importVersions refuses an app this catalog lacks or whose guard does not take the step
// from the source's version, and records each app's move.
func (e *Engine) importVersions(ctx context.Context, p migration.Payload, plan *ImportPlan) error {
	from := map[string]string{}
	for name, v := range p.Versions {
		from[name] = v
	}
	for name, a := range p.Apps {
		if from[name] == "" {
			from[name] = a.Version
		}
	}
	names := make([]string, 0, len(from))
	for name := range from {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a, ok := e.opts.Catalog.App(name)
		if !ok {
			return refuse(CodeInvalidConfiguration, "/migration", "the migration string brings app %s %s, which this fedhost's catalog does not have: ask this hosting provider to install fedhost-app-%s", name, bounded(from[name], 64), name)
		}
		to, fromVersion := a.Version, from[name]
		c, err := a.Plugin.Client()
		if err != nil {
			return refuse(CodeUnavailable, "/migration", "app %s is not running here (%v): try again once it is", name, err)
		}
		guard, err := c.App().VersionGuard(ctx)
		switch {
		case sdk.CodeOf(err) == sdk.CodeUnsupported:
		case err != nil:
			return refuse(CodeUnavailable, "/migration", "app %s: its version guard did not answer (%v): try again", name, err)
		default:
			// The guard speaks of the app's versions: the source's plugin version, when
			// installed here too, says which app version it ran.
			if old, ok := e.opts.Catalog.AppAt(name, fromVersion); ok {
				if oc, err := old.Plugin.Client(); err == nil {
					if og, err := oc.App().VersionGuard(ctx); err == nil {
						fromVersion = og.Version
					}
				}
			}
			if _, err := scheduler.CheckStep(guard, fromVersion, guard.Version); err != nil {
				return refuse(CodeInvalidConfiguration, "/migration", "app %s cannot move from version %s, which the source ran, to %s, which this fedhost runs: %v; import at a fedhost that runs a version in between, or update the source first", name, bounded(fromVersion, 64), guard.Version, err)
			}
			to = guard.Version
		}
		_, data := p.Apps[name]
		plan.Apps = append(plan.Apps, ImportedApp{App: name, From: bounded(fromVersion, 64), To: to, Data: data})
	}
	return nil
}

// importConfig puts the secrets back into the configuration, applies this catalog's
// renames and validates it against the schemas of the versions the import runs.
func (e *Engine) importConfig(ctx context.Context, p migration.Payload, plan *ImportPlan) error {
	var doc map[string]any
	if err := json.Unmarshal(p.Config, &doc); err != nil || doc == nil {
		return refuse(CodeInvalidConfiguration, "/migration", "the migration string's configuration is not a JSON object: export again at the source")
	}
	for ptr, v := range p.Secrets {
		if !strings.HasPrefix(ptr, "/apps/") || !catalog.SetPointer(doc, ptr, v) {
			return refuse(CodeInvalidConfiguration, "/migration", "the migration string holds a secret outside any app's options: export again at the source")
		}
	}
	// The configuration was made for the source's versions: a rename applies on the way
	// from below its Since to at or above it.
	from := map[string]string{}
	for _, ia := range plan.Apps {
		from[ia.App] = ia.From
	}
	apps, _ := doc["apps"].(map[string]any)
	for name, v := range apps {
		a, ok := e.opts.Catalog.App(name)
		if !ok {
			return refuse(CodeInvalidConfiguration, "/migration", "the migration string's configuration has app %s, which this fedhost's catalog does not have: ask this hosting provider to install fedhost-app-%s", bounded(name, 64), bounded(name, 64))
		}
		appCfg, _ := v.(map[string]any)
		opts, _ := appCfg["options"].(map[string]any)
		for _, r := range a.Renames {
			if _, found := catalog.GetPointer(opts, r.From); found && opts != nil && catalog.RenameApplies(r, from[name], a.Version) {
				plan.Renames = append(plan.Renames, ImportedRename{App: name, From: r.From, To: r.To})
			}
		}
	}
	sort.Slice(plan.Renames, func(i, j int) bool { return plan.Renames[i].App < plan.Renames[j].App })
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	filled, unmigrated, err := e.validate(ctx, raw, "", from, nil)
	if err != nil {
		var he *Error
		if errors.As(err, &he) {
			he.Message = "the imported configuration does not fit this fedhost's app versions: " + he.Message
		}
		return err
	}
	plan.config, plan.Unmigrated = filled, unmigrated
	// Renames the catalog could not apply are not renames applied.
	kept := plan.Renames[:0]
	for _, r := range plan.Renames {
		moved := true
		for _, u := range unmigrated {
			if u.App == r.App && u.From == r.From {
				moved = false
			}
		}
		if moved {
			kept = append(kept, r)
		}
	}
	plan.Renames = kept
	return nil
}

// storeImport creates the deployment of a checked import, keeps its secrets and
// pointers, and queues its first build.
func (e *Engine) storeImport(ctx context.Context, req ImportRequest, p migration.Payload, plan ImportPlan) (ImportPlan, error) {
	pending, err := json.Marshal(Pending{ID: p.ID, SourceURL: p.Source.URL, ConfirmToken: p.Source.ConfirmToken,
		Apps: p.Apps, Directory: p.Directory, Domain: p.Domain})
	if err != nil {
		return ImportPlan{}, err
	}
	d, err := e.Create(ctx, req.Owner, plan.Name, plan.Namespace)
	if err != nil {
		return ImportPlan{}, err
	}
	cfg, refs, err := e.takeOperatorSecrets(ctx, d, plan.config, map[string]string{}, false)
	if err != nil {
		return ImportPlan{}, e.failImport(ctx, d.ID, err)
	}
	if refs[importPointer], err = e.keepImport(ctx, d, importPointer, string(pending)); err != nil {
		return ImportPlan{}, e.failImport(ctx, d.ID, err)
	}
	b, err := e.enqueue(ctx, d, store.OperationDeploy, cfg, refs, e.revisionFor(d, false))
	if err != nil {
		return ImportPlan{}, e.failImport(ctx, d.ID, err)
	}
	plan.Deployment, plan.Build = d.ID, b.ID
	return plan, nil
}

// failImport marks failed a deployment an import created and could not queue, so that
// its namespace and domain show why; it returns err.
func (e *Engine) failImport(ctx context.Context, id string, err error) error {
	_ = e.opts.Store.UpdateDeployment(context.WithoutCancel(ctx), id, map[string]any{"state": StateFailed})
	return err
}
