package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

const (
	logsDirName = "logs"
	// baseID marks the HTTPS server of the plugin's config: when a Caddy that is not
	// managed lacks it, the Caddy was restarted and gets the whole config again.
	baseID = "fedhost-front-door"
)

// provider serves route on Caddy.
type provider struct {
	now func() time.Time

	mu      sync.Mutex // one change of Caddy's config at a time
	s       settings
	raw     string // the settings Configure last took
	dataDir string
	store   store
	records map[string]*record // by routeID
	admin   *admin
	managed *managedCaddy
	super   *supervisor
}

func newProvider() *provider { return &provider{now: time.Now} }

// Configure takes the settings, reads the route records and starts the managed Caddy (or
// checks the running one), giving it every recorded route.
func (p *provider) Configure(ctx context.Context, raw json.RawMessage) error {
	s, err := parseSettings(raw)
	if err != nil {
		return err
	}
	dataDir := sdk.DataDir()
	if dataDir == "" {
		return sdk.Invalid("settings", "the plugin keeps its routes in its data dir, and the host gave none (%s)", sdk.DataDirEnv)
	}
	p.mu.Lock()
	if p.admin != nil && p.raw == string(raw) && (p.managed == nil || p.managed.running()) {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	p.close()

	p.mu.Lock()
	defer p.mu.Unlock()
	st := store{dir: dataDir}
	rs, err := st.load()
	if err != nil {
		return err
	}
	p.s, p.raw, p.dataDir, p.store = s, string(raw), dataDir, st
	p.records = map[string]*record{}
	for _, r := range rs {
		p.records[routeID(r.Tenant, r.Instance)] = r
	}
	if !*s.Managed {
		p.admin = newAdmin(s.AdminSocket)
		if err := p.ensureBase(ctx); err != nil {
			p.admin = nil // so that the same settings again try again
			return err
		}
		return nil
	}
	binary, err := findBinary(s.Binary)
	if err != nil {
		return err
	}
	m, err := prepareManaged(dataDir, binary)
	if err != nil {
		return err
	}
	if err := m.start(ctx); err != nil {
		return err
	}
	p.managed, p.admin = m, newAdmin(m.socket())
	if err := p.restore(ctx); err != nil {
		m.stop()
		p.managed, p.admin = nil, nil
		// Most often a port that is taken, or below 1024 without the right to bind it.
		return fmt.Errorf("the managed Caddy did not take its config: check that listen, https_port and http_port can be bound: %w", err)
	}
	p.super = supervise(m, &p.mu, p.restore)
	return nil
}

// close stops the managed Caddy; p.mu must not be held (a restart under way takes it).
func (p *provider) close() {
	p.mu.Lock()
	sup, m := p.super, p.managed
	p.super, p.managed, p.admin = nil, nil, nil
	p.mu.Unlock()
	if sup != nil {
		sup.stop()
	} else if m != nil {
		m.stop()
	}
}

func (p *provider) socket() string {
	if p.managed != nil {
		return p.managed.socket()
	}
	return p.s.AdminSocket
}

// restore gives a Caddy that just started the whole config with every recorded route in
// one /load, before it serves anything. Should that load fail, it loads the routes one by
// one, so that one bad record does not keep the others down. p.mu is held.
func (p *provider) restore(ctx context.Context) error {
	rs := p.sorted()
	if err := p.admin.load(ctx, p.config(rs)); err == nil {
		hclog.Default().Info("caddy given its routes", "routes", len(rs))
		return nil
	} else if len(rs) == 0 {
		return err
	} else {
		hclog.Default().Error("caddy refused the recorded routes together: giving them one by one", "error", err)
	}
	if err := p.admin.load(ctx, p.config(nil)); err != nil {
		return err
	}
	for _, r := range rs {
		if err := p.apply(ctx, nil, r); err != nil {
			hclog.Default().Error("caddy refused a recorded route: provision it again", "tenant", r.Tenant, "instance", r.Instance, "error", err)
		}
	}
	return nil
}

// ensureBase loads the whole config into a Caddy not managed when it lacks the plugin's
// servers (it was restarted, or never configured). p.mu is held.
func (p *provider) ensureBase(ctx context.Context) error {
	ok, err := p.admin.exists(ctx, baseID)
	if err != nil || ok {
		return err
	}
	return p.restore(ctx)
}

func (p *provider) config(rs []*record) object {
	cfg := baseConfig(p.s, p.socket(), filepath.Join(p.dataDir, logsDirName), rs)
	https := cfg["apps"].(object)["http"].(object)["servers"].(object)[httpsServer].(object)
	https["@id"] = baseID
	if p.managed != nil {
		cfg["logging"].(object)["logs"].(object)["default"].(object)["writer"] = object{
			"output": "file", "filename": p.managed.logPath(), "mode": "0600",
		}
	}
	return cfg
}

func (p *provider) sorted() []*record {
	rs := make([]*record, 0, len(p.records))
	for _, r := range p.records {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		return routeID(rs[i].Tenant, rs[i].Instance) < routeID(rs[j].Tenant, rs[j].Instance)
	})
	return rs
}

// ready checks that Configure ran and, for a Caddy not managed, that it still has the
// plugin's config. p.mu is held.
func (p *provider) ready(ctx context.Context) error {
	if p.admin == nil {
		return sdk.Unavailable("the caddy plugin has no settings yet: the host configures it first")
	}
	if p.managed == nil {
		return p.ensureBase(ctx)
	}
	if !p.managed.running() {
		return sdk.Unavailable("the managed Caddy is restarting: try again in a moment (its log is %s)", p.managed.logPath())
	}
	return nil
}

// Validate checks the request without touching Caddy.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	_, err := parseRequest(spec, p.now())
	return err
}

// Provision adds the route to Caddy or changes it in place; the same request again
// changes nothing. A host another route holds is refused.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	r, err := p.recordOf(req)
	if err != nil {
		return resource.Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return resource.Result{}, err
	}
	id := routeID(r.Tenant, r.Instance)
	if err := p.checkHosts(r); err != nil {
		return resource.Result{}, err
	}
	old := p.records[id]
	if old == nil || !old.same(r) || !p.live(ctx, id) {
		if err := p.apply(ctx, old, r); err != nil {
			// Put back what was there, so Caddy and the records agree.
			if rerr := p.apply(ctx, r, old); rerr != nil {
				hclog.Default().Error("putting the route back after a failed change failed", "tenant", r.Tenant, "instance", r.Instance, "error", rerr)
			}
			return resource.Result{}, err
		}
		if err := p.store.save(r); err != nil {
			return resource.Result{}, err
		}
		p.records[id] = r
		hclog.Default().Info("route provisioned", "tenant", r.Tenant, "instance", r.Instance, "hosts", len(r.Hosts), "tls", r.tls())
	}
	return p.result(r)
}

func (p *provider) recordOf(req resource.Request) (*record, error) {
	spec, err := parseRequest(req.Spec, p.now())
	if err != nil {
		return nil, err
	}
	r := &record{Tenant: req.Tenant, Instance: req.Instance, Hosts: spec.Hosts, Upstream: spec.Upstream}
	if spec.TLS != nil {
		key := req.Secrets[spec.TLS.Key.Secret]
		if err := checkKey(spec.TLS.Certificate, key); err != nil {
			return nil, err
		}
		r.Certificate, r.key = spec.TLS.Certificate, key
	}
	return r, nil
}

// checkHosts refuses a host that another route holds.
func (p *provider) checkHosts(r *record) error {
	for i, h := range r.Hosts {
		for _, o := range p.records {
			if (o.Tenant == r.Tenant && o.Instance == r.Instance) || !slices.Contains(o.Hosts, h) {
				continue
			}
			msg := "host %s is routed for another deployment: choose another host name, or remove that deployment's route first"
			if o.Tenant == r.Tenant {
				msg = "host %s is routed to another app of this deployment: give each app its own host names"
			}
			return &sdk.Error{Code: sdk.CodeConflict, Field: "request/hosts/" + strconv.Itoa(i), Message: fmt.Sprintf(msg, h)}
		}
	}
	return nil
}

func (p *provider) live(ctx context.Context, id string) bool {
	ok, err := p.admin.exists(ctx, id)
	return err == nil && ok
}

func (p *provider) result(r *record) (resource.Result, error) {
	data, err := json.Marshal(contract.RouteResult{URLs: urls(r.Hosts, r.tls(), p.s)})
	if err != nil {
		return resource.Result{}, err
	}
	return resource.Result{Data: data}, nil
}

// apply changes Caddy's config from route old (nil: none) to route r (nil: none), each
// object by its @id, in an order that never leaves a route's host without its
// certificate: logger, certificate, TLS policy, route, host→logger entries; removal the
// other way round. p.mu is held.
func (p *provider) apply(ctx context.Context, old, r *record) error {
	if old != nil && (r == nil || old.tls() != r.tls()) {
		if err := p.removeObjects(ctx, old, r); err != nil {
			return err
		}
		old = nil
	}
	if r == nil {
		return nil
	}
	id := routeID(r.Tenant, r.Instance)
	srv := serverOf(r)
	if err := p.ensureLogger(ctx, r.Tenant); err != nil {
		return err
	}
	if r.tls() {
		if err := p.admin.put(ctx, certID(id), certObject(r), func() error {
			return p.admin.do(ctx, http.MethodPost, "/config/apps/tls/certificates/load_pem", certObject(r), nil)
		}); err != nil {
			return err
		}
		if err := p.admin.put(ctx, policyID(id), policyObject(r), func() error {
			return p.admin.do(ctx, http.MethodPut, "/config/apps/http/servers/"+httpsServer+"/tls_connection_policies/0", policyObject(r), nil)
		}); err != nil {
			return err
		}
	}
	if err := p.admin.put(ctx, id, routeObject(r), func() error {
		// First, before the http server's redirect, which takes whatever is left.
		return p.admin.do(ctx, http.MethodPut, "/config/apps/http/servers/"+srv+"/routes/0", routeObject(r), nil)
	}); err != nil {
		return err
	}
	for _, h := range r.Hosts {
		// A string, not a list: POST sets a string, where it would append to a list.
		if err := p.admin.do(ctx, http.MethodPost, loggerNamePath(srv, h), loggerName(r.Tenant), nil); err != nil {
			return err
		}
	}
	if old != nil {
		for _, h := range old.Hosts {
			if !slices.Contains(r.Hosts, h) {
				if err := p.removeLoggerName(ctx, srv, h); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeObjects takes route old out of Caddy; next is the route that replaces it (nil:
// none), whose tenant keeps its logger.
func (p *provider) removeObjects(ctx context.Context, old, next *record) error {
	id := routeID(old.Tenant, old.Instance)
	for _, h := range old.Hosts {
		if err := p.removeLoggerName(ctx, serverOf(old), h); err != nil {
			return err
		}
	}
	for _, obj := range []string{id, policyID(id), certID(id)} {
		if err := p.admin.remove(ctx, obj); err != nil {
			return err
		}
	}
	if next != nil && next.Tenant == old.Tenant {
		return nil
	}
	for _, o := range p.records {
		if o.Tenant == old.Tenant && o.Instance != old.Instance {
			return nil
		}
	}
	err := p.admin.do(ctx, http.MethodDelete, "/config/logging/logs/"+loggerName(old.Tenant), nil, nil)
	if errors.Is(err, errNotFound) {
		return nil
	}
	return err
}

func (p *provider) ensureLogger(ctx context.Context, tenant string) error {
	var v json.RawMessage
	path := "/config/logging/logs/" + loggerName(tenant)
	if err := p.admin.do(ctx, http.MethodGet, path, nil, &v); err != nil && !errors.Is(err, errNotFound) {
		return err
	} else if err == nil && string(v) != "null" {
		return nil
	}
	return p.admin.do(ctx, http.MethodPost, path, accessLog(filepath.Join(p.dataDir, logsDirName), tenant), nil)
}

func loggerNamePath(srv, host string) string {
	return "/config/apps/http/servers/" + srv + "/logs/logger_names/" + host
}

func (p *provider) removeLoggerName(ctx context.Context, srv, host string) error {
	var v json.RawMessage
	if err := p.admin.do(ctx, http.MethodGet, loggerNamePath(srv, host), nil, &v); errors.Is(err, errNotFound) || (err == nil && string(v) == "null") {
		return nil
	} else if err != nil {
		return err
	}
	err := p.admin.do(ctx, http.MethodDelete, loggerNamePath(srv, host), nil, nil)
	if errors.Is(err, errNotFound) {
		return nil
	}
	return err
}

func serverOf(r *record) string {
	if r.tls() {
		return httpsServer
	}
	return httpServer
}

// Deprovision takes the route, its certificate and its record away; a route that is gone
// is no error.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := routeID(req.Tenant, req.Instance)
	old := p.records[id]
	if old == nil {
		return nil
	}
	if err := p.ready(ctx); err != nil {
		return err
	}
	delete(p.records, id)
	if err := p.apply(ctx, old, nil); err != nil {
		p.records[id] = old
		return err
	}
	if err := p.store.remove(req.Tenant, req.Instance); err != nil {
		return err
	}
	hclog.Default().Info("route deprovisioned", "tenant", req.Tenant, "instance", req.Instance)
	return nil
}

// Status says whether the route is live in Caddy.
func (p *provider) Status(ctx context.Context, req resource.Request) (resource.Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.records[routeID(req.Tenant, req.Instance)]
	if r == nil {
		return resource.Status{State: "missing", Message: "no route is recorded for this instance"}, nil
	}
	res, err := p.result(r)
	if err != nil {
		return resource.Status{}, err
	}
	if p.admin == nil || (p.managed != nil && !p.managed.running()) {
		return resource.Status{State: "pending", Message: "Caddy is starting; the route is recorded and is given to it once it runs", Data: res.Data}, nil
	}
	ok, err := p.admin.exists(ctx, routeID(r.Tenant, r.Instance))
	switch {
	case err != nil:
		return resource.Status{State: "degraded", Message: "Caddy's admin API does not answer: " + err.Error(), Data: res.Data}, nil
	case !ok:
		return resource.Status{State: "degraded", Message: "the route is recorded but not in Caddy's config: provision it again", Data: res.Data}, nil
	}
	return resource.Status{State: "ready", Message: "the route is live in Caddy", Data: res.Data}, nil
}

var (
	_ resource.Provider       = (*provider)(nil)
	_ resource.Validator      = (*provider)(nil)
	_ resource.StatusReporter = (*provider)(nil)
)
