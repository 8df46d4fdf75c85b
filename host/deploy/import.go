package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// Transfer, when set, is the operator's confirmation of the domain's transfer the
	// preview quoted: the first build then transfers the domain with the string's auth
	// code. Without it the operator delegates the domain.
	Transfer *ImportTransfer
}

// ImportTransfer is an operator's yes to the transfer of an imported domain, as for
// TransferDomainIn: the price and currency the preview quoted and the contact recorded as
// the domain's holder; Registrar and ContactID default to the preview's.
type ImportTransfer struct {
	Registrar   string
	ContactID   string
	PriceMicros int64
	Currency    string
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

// ImportedDomain is what becomes of the domain: "transfer" (the string brings an auth
// code and this host runs a registrar: the transfer to Registrar is quoted, and done by
// the first build once Confirmed), "delegate" (the operator points the domain's
// nameservers here) or "none".
type ImportedDomain struct {
	Name      string `json:"name,omitempty"`
	Action    string `json:"action"`
	Registrar string `json:"registrar,omitempty"`
	// PriceMicros and Currency are the registrar's transfer price (CheckDomain); 0 and
	// QuoteError, saying why, when it quoted none.
	PriceMicros int64  `json:"price_micros,omitempty"`
	Currency    string `json:"currency,omitempty"`
	QuoteError  string `json:"quote_error,omitempty"`
	// ContactID and Contact (its name) are the operator's contact recorded as the
	// domain's holder: the one confirmed, else their first; empty when they have none
	// (the registrar account's own contact holds it then).
	ContactID string `json:"contact_id,omitempty"`
	Contact   string `json:"contact,omitempty"`
	// Confirmed: the operator confirmed the transfer; the first build asks for it after
	// the restore and the users.
	Confirmed bool `json:"confirmed,omitempty"`
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
// resource until used: per app its snapshot, the directory and the domain (with its auth
// code unless the transfer was confirmed: then importTransfer keeps it), and how to
// confirm to the source.
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
// and domain must be free. A domain the import can transfer is quoted (quoteTransfer),
// and req.Transfer, the operator's confirmation of that quote, checked. With Preview it
// answers the plan; else it creates the deployment, keeps the configuration's secrets
// and the import's pointers (and a confirmed transfer's auth code) in the secret
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
	if err := e.quoteTransfer(ctx, req, p, &plan.Domain); err != nil {
		return ImportPlan{}, err
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
	filled, _, unmigrated, err := e.validate(ctx, raw, "", from, nil)
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

// quoteTransfer quotes the transfer of a domain the import can transfer (the registrar's
// transfer price, as CheckDomain answers it, and the contact) when it is previewed or
// confirmed, and checks the operator's confirmation: a transfer the import cannot make, a
// registrar this host does not run, another's contact, or a price other than the one the
// registrar quotes now is refused before anything is stored.
func (e *Engine) quoteTransfer(ctx context.Context, req ImportRequest, p migration.Payload, dom *ImportedDomain) error {
	t := req.Transfer
	if t != nil && dom.Action != "transfer" {
		switch {
		case dom.Name == "":
			return refuse(CodeInvalidConfiguration, "/transfer", "the imported configuration has no domain to transfer: import without \"transfer\"")
		case p.Domain.AuthCode == "":
			return refuse(CodeInvalidConfiguration, "/transfer", "the migration string brings no auth code for %s: import without \"transfer\" and delegate it, or transfer it later with fedhost domains transfer", dom.Name)
		default:
			return refuse(CodeInvalidConfiguration, "/transfer", "this fedhost runs no registrar to transfer %s to: import without \"transfer\" and delegate it", dom.Name)
		}
	}
	if dom.Action != "transfer" || (!req.Preview && t == nil) {
		return nil
	}
	if t != nil && t.Registrar != "" && t.Registrar != dom.Registrar {
		if !slices.Contains(e.Registrars(), t.Registrar) {
			return refuse(CodeInvalidConfiguration, "/transfer/registrar", "name one of this fedhost's registrars (GET /api/v1/registrars lists them)")
		}
		dom.Registrar = t.Registrar
	}
	a, err := e.CheckDomain(ctx, dom.Registrar, dom.Name)
	switch {
	case err != nil:
		dom.QuoteError = bounded(hostMessage(err), maxDomainMessage)
	case a.TransferPriceMicros <= 0 || len(a.Currency) != 3:
		dom.QuoteError = fmt.Sprintf("registrar %s quoted no transfer price for %s: preview again later", dom.Registrar, dom.Name)
	default:
		dom.PriceMicros, dom.Currency = a.TransferPriceMicros, a.Currency
	}
	if t != nil && t.ContactID != "" {
		c, err := e.opts.Store.GetContact(ctx, req.Owner, t.ContactID)
		if errors.Is(err, store.ErrNotFound) {
			return refuse(CodeInvalidConfiguration, "/transfer/contact_id", "name one of your contacts (fedhost domains contacts lists them)")
		}
		if err != nil {
			return err
		}
		dom.ContactID, dom.Contact = c.ID, c.Name
	} else {
		cs, err := e.opts.Store.Contacts(ctx, req.Owner)
		if err != nil {
			return err
		}
		if len(cs) > 0 {
			dom.ContactID, dom.Contact = cs[0].ID, cs[0].Name
		}
	}
	if t == nil {
		return nil
	}
	if t.PriceMicros <= 0 || len(t.Currency) != 3 {
		return refuse(CodeInvalidConfiguration, "/transfer/price_micros", "confirm the transfer price and currency the preview quoted")
	}
	if dom.QuoteError == "" && (t.PriceMicros != dom.PriceMicros || t.Currency != dom.Currency) {
		return refuse(CodeConflict, "/transfer/price_micros", "registrar %s quotes the transfer of %s at %s now, not the %s confirmed: confirm the new price",
			dom.Registrar, dom.Name, price(dom.PriceMicros, dom.Currency), price(t.PriceMicros, bounded(t.Currency, 3)))
	}
	// A registrar that quoted nothing now checks the confirmed price itself at the transfer.
	dom.PriceMicros, dom.Currency, dom.Confirmed = t.PriceMicros, t.Currency, true
	return nil
}

// storeImport creates the deployment of a checked import, keeps its secrets and
// pointers, and queues its first build. A confirmed transfer's auth code is kept apart
// from the pointers (importTransferPointer), since it outlives them when the registrar
// does not answer.
func (e *Engine) storeImport(ctx context.Context, req ImportRequest, p migration.Payload, plan ImportPlan) (ImportPlan, error) {
	var transfer []byte
	domain := p.Domain
	if dom := plan.Domain; dom.Confirmed {
		var err error
		if transfer, err = json.Marshal(importTransfer{Domain: dom.Name, AuthCode: p.Domain.AuthCode, Registrar: dom.Registrar,
			ContactID: dom.ContactID, PriceMicros: dom.PriceMicros, Currency: dom.Currency}); err != nil {
			return ImportPlan{}, err
		}
		domain.AuthCode = ""
	}
	pending, err := json.Marshal(Pending{ID: p.ID, SourceURL: p.Source.URL, ConfirmToken: p.Source.ConfirmToken,
		Apps: p.Apps, Directory: p.Directory, Domain: domain})
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
	if transfer != nil {
		if refs[importTransferPointer], err = e.keepImport(ctx, d, importTransferPointer, string(transfer)); err != nil {
			return ImportPlan{}, e.failImport(ctx, d.ID, err)
		}
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
