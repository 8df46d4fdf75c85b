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
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// run is one build in progress: its events and what it knows of the deployment.
type run struct {
	e        *Engine
	revision string // the catalog revision a deploy built, recorded when it succeeds
	build    store.Build
	d        store.Deployment
	rows     map[string]store.Resource
	owners   map[string]string // secret reference -> secret instance
	// imported are an import's pointers while its data waits to be restored.
	imported *Pending
	// transfer is an import's confirmed transfer while the registrar has not answered it.
	transfer *importTransfer
}

func (r *run) event(level, stepName string, progress int, format string, args ...any) {
	if r.build.ID == "" {
		// Work outside a build (the retention job) logs instead.
		r.e.log.Info(fmt.Sprintf(format, args...), "deployment", r.d.ID, "step", stepName)
		return
	}
	ev := store.BuildEvent{BuildID: r.build.ID, Step: stepName, Level: level, Message: fmt.Sprintf(format, args...), Progress: progress}
	if _, err := r.e.opts.Store.AppendBuildEvent(context.Background(), ev); err != nil {
		r.e.log.Error("recording a build event", "build_id", r.build.ID, "error", err)
	}
}

// Build runs a queued build: the queue's builder.
func (e *Engine) Build(ctx context.Context, buildID string, _ func(step, message string)) error {
	b, err := e.opts.Store.GetBuild(ctx, buildID)
	if err != nil {
		return err
	}
	d, err := e.opts.Store.GetDeployment(ctx, b.DeploymentID)
	if err != nil {
		return err
	}
	r := &run{e: e, build: b, d: d}
	if err := r.load(ctx); err != nil {
		return err
	}
	switch b.Operation {
	case store.OperationSuspend:
		err = r.suspend(ctx)
	case store.OperationDestroy:
		err = r.destroy(ctx)
	case store.OperationBackup, store.OperationRestore, store.OperationDrill:
		err = r.operate(ctx, b.Operation)
	case store.OperationExport:
		err = r.export(ctx)
	case store.OperationRevokeExport:
		err = r.revokeExport(ctx)
	default:
		err = r.deploy(ctx)
	}
	state := map[string]string{store.OperationSuspend: StateSuspended, store.OperationDestroy: StateDestroyed, store.OperationDeploy: StateActive}[b.Operation]
	if b.Operation == store.OperationExport && err == nil {
		// A failed export started the nodes again: the deployment stays as it was.
		state = StateExported
	}
	columns := map[string]any{"state": state}
	if state == "" {
		// An operation (backup, restore) leaves the deployment's state as it is; its
		// build records how it went.
		if err != nil {
			r.event(store.LevelError, "verdict", 100, "%v", err)
		}
		return err
	}
	var rolledBack *RolledBackError
	if errors.As(err, &rolledBack) {
		// The old version runs again on its own data: the deployment is as before.
		columns["state"] = StateActive
		r.event(store.LevelError, "verdict", 100, "%v", err)
	} else if err != nil {
		columns["state"] = StateFailed
		r.event(store.LevelError, "verdict", 100, "%v", err)
	} else if r.revision != "" {
		columns["catalog_revision"] = r.revision
	}
	if uerr := e.opts.Store.UpdateDeployment(context.WithoutCancel(ctx), d.ID, columns); uerr != nil {
		e.log.Error("recording the deployment's state", "deployment", d.ID, "error", uerr)
	}
	r.recordUsage(context.WithoutCancel(ctx), err)
	return err
}

func (r *run) load(ctx context.Context) error {
	rows, err := r.e.opts.Store.Resources(ctx, r.d.ID)
	if err != nil {
		return err
	}
	r.rows = map[string]store.Resource{}
	for _, row := range rows {
		r.rows[row.Name] = row
	}
	r.owners = secretOwners(rows)
	return nil
}

func (r *run) deploy(ctx context.Context) error {
	if err := r.e.opts.Store.UpdateDeployment(ctx, r.d.ID, map[string]any{"state": StateDeploying}); err != nil {
		return err
	}
	r.noteRenewals()
	cfg, err := catalog.ParseConfig(json.RawMessage(r.build.Config))
	if err != nil {
		return err
	}
	refs := r.e.storedRefs(r.d)
	options := map[string]json.RawMessage{}
	for name, a := range cfg.Apps {
		options[name] = placeholderOptions(a.OptionsOrEmpty(), name, refs)
	}
	for _, ref := range refs {
		r.owners[ref] = operatorInstance
	}
	var confirm *importConfirm
	if r.imported, confirm, r.transfer, err = r.loadImport(ctx, refs); err != nil {
		return err
	}

	// Everything is asked and checked before anything changes.
	r.event(store.LevelInfo, "plan", 2, "asking the enabled apps what they need")
	existing := map[string]json.RawMessage{}
	for name, row := range r.rows {
		existing[name] = json.RawMessage(row.Result)
	}
	revision, versions, err := r.e.revisionOf(ctx, r.build.CatalogRevision)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	changes, err := r.e.checkGuards(ctx, r.d, cfg, versions)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	hosts, err := r.e.hostNames(ctx, json.RawMessage(r.build.Config), revision)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	plans, dns, id, err := r.e.plan(ctx, r.d, cfg, options, existing, versions, hosts)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := r.importGroups(ctx, id); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	r.revision = revision
	total := 0
	if dns != nil {
		total++
	}
	if id.Directory != nil {
		total++
	}
	if id.Mail != nil {
		total++
	}
	if id.AuthTLS != nil {
		total++
	}
	for _, ap := range plans {
		total += len(ap.Steps) + 1
		if ap.TLS != nil {
			total++
		}
	}
	r.event(store.LevelInfo, "plan", 5, "%d apps, %d resources and their nodes checked with their providers", len(plans), total-len(plans))

	// An app with data is stopped and backed up before it moves to another version; if
	// the build fails then, its data and old version come back.
	upgrades, err := r.prepareUpgrades(ctx, changes)
	if err != nil {
		return err
	}
	if err := r.apply(ctx, cfg, plans, dns, id, total); err != nil {
		if len(upgrades) > 0 {
			return r.rollback(ctx, upgrades, err)
		}
		return err
	}
	if r.imported != nil || confirm != nil || r.transfer != nil {
		if err := r.importUsers(ctx); err != nil {
			return err
		}
		if err := r.importDomain(ctx, refs); err != nil {
			return err
		}
		if err := r.finishImport(ctx, refs, confirm); err != nil {
			return err
		}
	}
	r.event(store.LevelInfo, "verdict", 100, "all nodes are healthy")
	return nil
}

// apply provisions the deployment's zone, directory and issuer's certificate, then the
// plans in order, then removes what they no longer ask for.
func (r *run) apply(ctx context.Context, cfg catalog.Config, plans []*appPlan, dns *step, id *identity, total int) error {
	done := 0
	progress := func() int { return 5 + 85*done/max(total, 1) }
	keep := map[string]bool{}
	if dns != nil {
		res, err := r.provision(ctx, *dns, progress())
		if err != nil {
			return err
		}
		keep[dns.Name] = true
		done++
		var zone contract.DNSResult
		if err := json.Unmarshal(res, &zone); err != nil {
			return fmt.Errorf("%s: result: %w", dns.Name, err)
		}
		r.event(store.LevelInfo, "dns", progress(), "zone %s is served by %s", zone.Zone, strings.Join(zone.Nameservers, ", "))
		// The domain is registered or delegated before a certificate is asked for.
		if err := r.domainStep(ctx, cfg.Domain, zone); err != nil {
			return fmt.Errorf("domain: %w", err)
		}
		for _, ap := range plans {
			if ap.TLS != nil {
				// The certificate answers DNS-01 with the zone's update key, known now.
				if ap.TLS, err = r.e.tlsStep(ctx, ap.App.Name, ap.Host, &zone); err != nil {
					return err
				}
			}
		}
		if id.AuthTLS != nil {
			if id.AuthTLS, err = r.e.tlsStep(ctx, "", id.AuthHost, &zone); err != nil {
				return err
			}
			id.AuthTLS.Name = authTLSInstance
		}
	}
	var directory json.RawMessage
	if id.Directory != nil {
		res, err := r.provision(ctx, *id.Directory, progress())
		if err != nil {
			return err
		}
		directory = res
		keep[directoryInstance] = true
		done++
	}
	if id.Mail != nil {
		if _, err := r.provision(ctx, *id.Mail, progress()); err != nil {
			return err
		}
		keep[MailResource] = true
		done++
	}
	var authCert *contract.TLSResult
	if id.AuthTLS != nil {
		res, err := r.provision(ctx, *id.AuthTLS, progress())
		if err != nil {
			return err
		}
		authCert = &contract.TLSResult{}
		if err := json.Unmarshal(res, authCert); err != nil {
			return fmt.Errorf("%s: result: %w", authTLSInstance, err)
		}
		keep[authTLSInstance] = true
		done++
	}
	authRouted := false
	for _, ap := range plans {
		results := map[string]json.RawMessage{}
		for _, s := range ap.Steps {
			if s.Type == contract.OIDC {
				// The issuer and the directory as made, not as the plan stood in for them.
				spec, err := completeOIDC(s.Spec, id.Issuer, directory)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Name, err)
				}
				s.Spec = spec
			}
			res, err := r.provision(ctx, s, progress())
			if err != nil {
				return err
			}
			results[s.Request] = res
			keep[s.Name] = true
			done++
			if s.Type == contract.OIDC && !authRouted && r.e.has(contract.Route) {
				// Before any node starts: an app reads the issuer's discovery document when
				// it starts.
				if err := r.openAuthRoute(ctx, id, res, authCert, progress()); err != nil {
					return err
				}
				keep[authRouteInstance], authRouted = true, true
			}
		}
		var cert *contract.TLSResult
		if ap.TLS != nil {
			res, err := r.provision(ctx, *ap.TLS, progress())
			if err != nil {
				return err
			}
			cert = &contract.TLSResult{}
			if err := json.Unmarshal(res, cert); err != nil {
				return fmt.Errorf("%s: result: %w", ap.TLS.Name, err)
			}
			keep[ap.TLS.Name] = true
			done++
		}
		// An imported app's data is back before its nodes start on it.
		if err := r.restoreImported(ctx, ap.App.Name, progress()); err != nil {
			return err
		}
		nodes, err := r.e.render(ctx, r.d, cfg.Domain, ap, results)
		if err != nil {
			return err
		}
		if ap.signsIn() && authCert != nil {
			if err := trustCA(nodes, authCert.CA); err != nil {
				return err
			}
		}
		var upstream string
		for _, n := range nodes {
			res, err := r.provision(ctx, n, progress())
			if err != nil {
				return err
			}
			var ir contract.InstanceResult
			if err := json.Unmarshal(res, &ir); err != nil || ir.State != "running" {
				return fmt.Errorf("node %s is %s, not running: %s", n.Name, ir.State, ir.Message)
			}
			r.event(store.LevelInfo, "verdict", progress(), "node %s is healthy at %s", n.Name, addresses(ir))
			keep[n.Name] = true
			if n.Name == ap.routeNode {
				upstream = ir.Addresses[ap.routePort]
			}
		}
		if ap.routeNode != "" {
			if err := r.openRoute(ctx, ap, upstream, cert, progress()); err != nil {
				return err
			}
			keep[ap.App.Name+"-route"] = true
		}
		done++
	}
	return r.removeUnplanned(ctx, cfg, keep)
}

// openRoute has the front door send the app's host name to its node, and checks that
// the front door serves the URL the node was given.
func (r *run) openRoute(ctx context.Context, ap *appPlan, upstream string, cert *contract.TLSResult, progress int) error {
	if upstream == "" {
		return fmt.Errorf("node %s: the instance provider gave no address for port %s, which the front door routes %s to", ap.routeNode, ap.routePort, ap.Host)
	}
	s, err := r.e.routeStep(ap.App.Name, ap.Host, upstream, cert)
	if err != nil {
		return err
	}
	if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
		return fmt.Errorf("%s (route by %s): %w", s.Name, s.Provider, err)
	}
	res, err := r.provision(ctx, s, progress)
	if err != nil {
		return err
	}
	var rr contract.RouteResult
	if err := json.Unmarshal(res, &rr); err != nil {
		return fmt.Errorf("%s: result: %w", s.Name, err)
	}
	if !slices.Contains(rr.URLs, ap.URL) {
		return fmt.Errorf("%s: the front door (route by %s) serves %s at %s, but the app was given %s: make front_door_https_port and front_door_http_port in fedhost.hcl the ports the route provider listens on",
			s.Name, s.Provider, ap.Host, strings.Join(rr.URLs, ", "), ap.URL)
	}
	r.event(store.LevelInfo, "route", progress, "app %s answers at %s", ap.App.Name, ap.URL)
	return nil
}

// openAuthRoute has the front door send the issuer's host name to where the deployment's
// OpenID provider listens, given by its result (oidc), and checks it serves the issuer.
func (r *run) openAuthRoute(ctx context.Context, id *identity, oidc json.RawMessage, cert *contract.TLSResult, progress int) error {
	var res contract.OIDCResult
	if err := json.Unmarshal(oidc, &res); err != nil {
		return fmt.Errorf("the OpenID provider's result: %w", err)
	}
	if res.Upstream == "" {
		return fmt.Errorf("the OpenID provider gave no address for the front door to route %s to: it must give one (its result's upstream) when the environment has a route provider", id.AuthHost)
	}
	if res.Issuer != id.Issuer {
		return fmt.Errorf("the OpenID provider answers as issuer %s, but the deployment's issuer is %s", res.Issuer, id.Issuer)
	}
	s, err := r.e.authRouteStep(id, res.Upstream, cert)
	if err != nil {
		return err
	}
	if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
		return fmt.Errorf("%s (route by %s): %w", s.Name, s.Provider, err)
	}
	raw, err := r.provision(ctx, s, progress)
	if err != nil {
		return err
	}
	var rr contract.RouteResult
	if err := json.Unmarshal(raw, &rr); err != nil {
		return fmt.Errorf("%s: result: %w", s.Name, err)
	}
	if !slices.Contains(rr.URLs, id.Issuer) {
		return fmt.Errorf("%s: the front door (route by %s) serves %s at %s, but the issuer is %s: make front_door_https_port and front_door_http_port in fedhost.hcl the ports the route provider listens on",
			s.Name, s.Provider, id.AuthHost, strings.Join(rr.URLs, ", "), id.Issuer)
	}
	r.event(store.LevelInfo, "route", progress, "the deployment's sign-in answers at %s", id.Issuer)
	return nil
}

func addresses(ir contract.InstanceResult) string {
	var out []string
	for name, a := range ir.Addresses {
		out = append(out, name+"="+a)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// provision makes or reconciles one resource or node and records it.
func (r *run) provision(ctx context.Context, s step, progress int) (json.RawMessage, error) {
	r.event("info", "provision", progress, "%s %s (%s by %s)", verb(r.rows, s), s.Name, s.Type, s.Provider)
	row, had := r.rows[s.Name]
	secrets := map[string][]byte{}
	if had {
		refs := map[string]string{}
		_ = json.Unmarshal([]byte(row.SecretRefs), &refs)
		for key, ref := range refs {
			v, err := r.e.reveal(ctx, r.d.Namespace, row.SecretInstance, ref)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.Name, err)
			}
			secrets[key] = v
		}
	}
	for _, ref := range specRefs(s) {
		// The update key of the zone for a certificate, a certificate's key for a route.
		owner, ok := r.owners[ref]
		if !ok {
			return nil, fmt.Errorf("%s names secret %s, which no resource of this deployment holds", s.Name, ref)
		}
		v, err := r.e.reveal(ctx, r.d.Namespace, owner, ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		secrets[ref] = v
	}
	if s.Type == contract.Instance {
		var spec contract.InstanceRequest
		if err := json.Unmarshal(s.Spec, &spec); err != nil {
			return nil, fmt.Errorf("node %s: %w", s.Name, err)
		}
		for _, ref := range placeholders(spec) {
			owner, ok := r.owners[ref]
			if !ok {
				return nil, fmt.Errorf("node %s names secret %s, which no resource of this deployment holds", s.Name, ref)
			}
			v, err := r.e.reveal(ctx, r.d.Namespace, owner, ref)
			if err != nil {
				return nil, fmt.Errorf("node %s: %w", s.Name, err)
			}
			secrets[ref] = v
		}
	}
	res, err := s.client.Provision(ctx, resource.Request{Tenant: r.d.Namespace, Instance: s.Name, Type: s.Type, Spec: s.Spec, Secrets: secrets})
	if err != nil {
		return nil, fmt.Errorf("%s (%s by %s): %w", s.Name, s.Type, s.Provider, err)
	}
	data := res.Data
	secretInstance, refs := "", map[string]string{}
	if len(res.Secrets) > 0 {
		secretInstance = s.Name + "-creds"
		files := map[string]contract.SecretFile{}
		for key := range res.Secrets {
			files[key] = contract.SecretFile{Supplied: true}
		}
		if refs, err = r.e.keep(ctx, r.d.Namespace, secretInstance, files, res.Secrets); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		if data, err = rewriteRefs(data, refs); err != nil {
			return nil, fmt.Errorf("%s: result: %w", s.Name, err)
		}
		for _, ref := range refs {
			r.owners[ref] = secretInstance
		}
	}
	if s.Type == contract.Secret {
		var sr contract.SecretResult
		if json.Unmarshal(data, &sr) == nil {
			for _, f := range sr.Files {
				r.owners[f.Ref] = s.Name
			}
		}
	}
	refsJSON, _ := json.Marshal(refs)
	newRow := store.Resource{DeploymentID: r.d.ID, Name: s.Name, App: s.App, Type: s.Type, Provider: s.Provider,
		Spec: string(s.Spec), SpecHash: s.hash(), Result: string(data), SecretInstance: secretInstance,
		SecretRefs: string(refsJSON), State: store.ResourceProvisioned}
	if err := r.e.opts.Store.PutResource(context.WithoutCancel(ctx), newRow); err != nil {
		return nil, err
	}
	r.rows[s.Name] = newRow
	if s.Type == contract.PostgreSQL || s.Type == contract.S3 {
		if err := r.recordBackups(ctx, s.App); err != nil {
			return nil, err
		}
	}
	return data, nil
}

func verb(rows map[string]store.Resource, s step) string {
	row, ok := rows[s.Name]
	switch {
	case !ok:
		return "creating"
	case row.SpecHash == s.hash() && row.State == store.ResourceProvisioned:
		return "checking"
	}
	return "changing"
}

// removeUnplanned handles what the deployment holds and the configuration no longer asks
// for: a disabled app keeps its data (its nodes stop) unless deleteData is set.
func (r *run) removeUnplanned(ctx context.Context, cfg catalog.Config, planned map[string]bool) error {
	var gone []store.Resource
	for name, row := range r.rows {
		// The backup repository's password lives as long as the app's backups.
		if strings.HasSuffix(name, resticSuffix) && cfg.Apps[row.App].Enable {
			continue
		}
		if !planned[name] && row.State != store.ResourceRetained {
			gone = append(gone, row)
		}
	}
	sortReverse(gone)
	for _, row := range gone {
		a := cfg.Apps[row.App]
		keepData := !a.Enable && !a.DeleteData && row.Type != contract.Instance && row.Name != operatorInstance && !frontDoorType(row.Type)
		if keepData {
			if row.State != store.ResourceKept {
				row.State = store.ResourceKept
				if err := r.e.opts.Store.PutResource(ctx, row); err != nil {
					return err
				}
				if row.App == "" {
					r.event(store.LevelInfo, "cleanup", 95, "keeping %s: nothing asks for it now, and it keeps its data", row.Name)
				} else {
					r.event(store.LevelInfo, "cleanup", 95, "keeping %s: app %s is disabled and keeps its data", row.Name, row.App)
				}
			}
			continue
		}
		if err := r.deprovision(ctx, row, false); err != nil {
			return err
		}
	}
	return nil
}

// sortReverse orders rows for removal: nodes first, secrets last.
func sortReverse(rows []store.Resource) {
	sort.SliceStable(rows, func(i, j int) bool {
		ri, rj := typeRank(rows[i].Type), typeRank(rows[j].Type)
		if ri != rj {
			return ri > rj
		}
		return rows[i].Name > rows[j].Name
	})
}

// deprovision removes one resource (and the secrets the host kept for it), or with retain
// keeps its data.
func (r *run) deprovision(ctx context.Context, row store.Resource, retain bool) error {
	client, _, err := r.e.route(row.Type)
	if err != nil {
		return fmt.Errorf("removing %s: %w", row.Name, err)
	}
	what := "removing"
	if retain {
		what = "keeping the data of"
	}
	r.event(store.LevelInfo, "deprovision", 95, "%s %s (%s by %s)", what, row.Name, row.Type, row.Provider)
	if err := client.Deprovision(ctx, resource.DeprovisionRequest{Tenant: r.d.Namespace, Instance: row.Name, Type: row.Type,
		Spec: json.RawMessage(row.Spec), Retain: retain}); err != nil {
		return fmt.Errorf("removing %s (%s by %s): %w", row.Name, row.Type, row.Provider, err)
	}
	if row.SecretInstance != "" && !retain {
		secrets, _, err := r.e.route(contract.Secret)
		if err != nil {
			return err
		}
		if err := secrets.Deprovision(ctx, resource.DeprovisionRequest{Tenant: r.d.Namespace, Instance: row.SecretInstance, Type: contract.Secret}); err != nil {
			return fmt.Errorf("removing the secrets of %s: %w", row.Name, err)
		}
	}
	if retain {
		return nil
	}
	delete(r.rows, row.Name)
	return r.e.opts.Store.DeleteResource(context.WithoutCancel(ctx), r.d.ID, row.Name)
}

// suspend stops the nodes and keeps everything else.
func (r *run) suspend(ctx context.Context) error {
	for _, row := range r.sorted() {
		if row.Type != contract.Instance || row.State != store.ResourceProvisioned {
			continue
		}
		if err := r.deprovision(ctx, row, true); err != nil {
			return err
		}
		row.State = store.ResourceStopped
		if err := r.e.opts.Store.PutResource(ctx, row); err != nil {
			return err
		}
	}
	r.event(store.LevelInfo, "verdict", 100, "suspended: the nodes are stopped and all data is kept")
	return nil
}

// destroy removes everything in reverse order but backup buckets, which are kept until
// the grace period ends.
func (r *run) destroy(ctx context.Context) error {
	rows := r.sorted()
	for _, row := range rows {
		if row.State == store.ResourceRetained {
			continue
		}
		if KeptAfterDestroy(row) {
			if err := r.deprovision(ctx, row, true); err != nil {
				return err
			}
			until := r.e.now().Add(r.e.opts.BackupGrace).UTC()
			row.State, row.RetainUntil = store.ResourceRetained, &until
			if err := r.e.opts.Store.PutResource(ctx, row); err != nil {
				return err
			}
			r.event(store.LevelInfo, "deprovision", 95, "kept the backups of %s until %s", row.Name, until.Format("2006-01-02"))
			continue
		}
		if err := r.deprovision(ctx, row, false); err != nil {
			return err
		}
	}
	secrets, _, err := r.e.route(contract.Secret)
	if err == nil {
		err = secrets.Deprovision(ctx, resource.DeprovisionRequest{Tenant: r.d.Namespace, Instance: operatorInstance, Type: contract.Secret})
	}
	if err != nil {
		return fmt.Errorf("removing the operator's secrets: %w", err)
	}
	// An import's values not used yet (an auth code whose transfer got no answer) go too:
	// the destroy's submission keeps no references, so every import instance is asked.
	for _, instance := range importInstances {
		if err := secrets.Deprovision(ctx, resource.DeprovisionRequest{Tenant: r.d.Namespace, Instance: instance, Type: contract.Secret}); err != nil {
			r.event(store.LevelWarn, "deprovision", 99, "the secret resource did not delete the import's values in %s (%v): deprovision it", instance, err)
		}
	}
	r.event(store.LevelInfo, "verdict", 100, "destroyed")
	return nil
}

func (r *run) sorted() []store.Resource {
	rows := make([]store.Resource, 0, len(r.rows))
	for _, row := range r.rows {
		rows = append(rows, row)
	}
	sortReverse(rows)
	return rows
}

// KeptAfterDestroy reports whether a destroy keeps a resource for the grace period: a
// backups bucket, and the secret holding its repository's password.
func KeptAfterDestroy(row store.Resource) bool {
	return (row.Type == contract.S3 && backupOnly(row.Spec)) || strings.HasSuffix(row.Name, resticSuffix)
}

// backupOnly reports whether every bucket of an s3 request is a backup bucket.
func backupOnly(spec string) bool {
	var req contract.S3Request
	if json.Unmarshal([]byte(spec), &req) != nil || len(req.Buckets) == 0 {
		return false
	}
	for _, b := range req.Buckets {
		if !b.Backup {
			return false
		}
	}
	return true
}
