package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// provider runs nodes as local processes below <data dir>/nodes/<tenant>/<instance>.
type provider struct {
	log hclog.Logger

	mu         sync.Mutex
	cfg        settings
	configured bool
	adopted    bool
	nodes      map[string]*node // by tenant/instance
	ports      map[int]string   // allocated port -> tenant/instance
}

// node is one tenant's instance: its recorded state and, while it runs, its supervisor.
type node struct {
	tenant, instance string
	workdir          string

	op    sync.Mutex // one provision, deprovision or status at a time
	mu    sync.Mutex // guards st, written by the supervisor too
	st    nodeState
	sup   *supervisor
	known bool // st was recorded
}

func newProvider() *provider {
	return &provider{log: hclog.Default(), nodes: map[string]*node{}, ports: map[int]string{}}
}

// Configure takes the settings and, the first time, adopts the nodes a previous run of
// the plugin left running.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseSettings(raw)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.cfg, p.configured = cfg, true
	p.mu.Unlock()
	p.log.Info("configured", "settings", cfg.String())
	return p.adoptOnce()
}

// settings returns the settings, with the defaults when the host gave none.
func (p *provider) settings() (settings, error) {
	p.mu.Lock()
	if !p.configured {
		cfg, err := parseSettings(nil)
		if err != nil {
			p.mu.Unlock()
			return settings{}, err
		}
		p.cfg, p.configured = cfg, true
	}
	cfg := p.cfg
	p.mu.Unlock()
	return cfg, p.adoptOnce()
}

func nodesRoot() (string, error) {
	dir := sdk.DataDir()
	if dir == "" {
		return "", sdk.Errorf(sdk.CodeInternal, "the local instance provider keeps its nodes in its data dir, and the host gave none (%s is empty): run it from the fedhost host", sdk.DataDirEnv)
	}
	return filepath.Join(dir, "nodes"), nil
}

// Validate refuses what this provider cannot run without creating anything.
func (p *provider) Validate(_ context.Context, _ string, raw json.RawMessage) error {
	cfg, err := p.settings()
	if err != nil {
		return err
	}
	spec, err := parseSpec(raw)
	if err != nil {
		return err
	}
	_, _, err = checkSpec(cfg, spec)
	return err
}

// Provision reconciles the node with the spec: it writes the files, starts the process,
// or restarts it when the effective spec changed, and waits until it is healthy.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	cfg, err := p.settings()
	if err != nil {
		return resource.Result{}, err
	}
	spec, err := parseSpec(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	bin, volumes, err := checkSpec(cfg, spec)
	if err != nil {
		return resource.Result{}, err
	}
	files, err := resolveFiles(spec, req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	root, err := nodesRoot()
	if err != nil {
		return resource.Result{}, err
	}
	n := p.lockNode(root, req.Tenant, req.Instance)
	defer n.op.Unlock()

	ports, err := p.allocatePorts(n, cfg, spec.Ports)
	if err != nil {
		return resource.Result{}, err
	}
	pl, err := buildPlan(spec, bin, n.workdir, volumes, ports, files)
	if err != nil {
		return resource.Result{}, err
	}
	hash := pl.hash()
	n.mu.Lock()
	unchanged := n.sup != nil && n.st.Hash == hash
	old := n.st.Plan
	n.mu.Unlock()
	if !unchanged {
		if err := p.apply(n, cfg, pl, hash, old, files); err != nil {
			return resource.Result{}, fmt.Errorf("node %s/%s: %s", req.Tenant, req.Instance, scrub(err.Error(), req.Secrets))
		}
	}
	return p.result(ctx, n, pl, req.Secrets)
}

// apply lays out the working dir for pl and (re)starts the node's process.
func (p *provider) apply(n *node, cfg settings, pl plan, hash string, old plan, files map[string][]byte) error {
	for _, dir := range []string{n.workdir, filepath.Join(n.workdir, "logs"), filepath.Join(n.workdir, "tmp")} {
		if err := mkdirPrivate(dir); err != nil {
			return fmt.Errorf("making the working dir: %w", err)
		}
	}
	for name := range old.Files {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(n.workdir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("removing file %s the node no longer has: %w", name, err)
			}
		}
	}
	for name, content := range files {
		if err := writeFileAtomic(filepath.Join(n.workdir, name), content); err != nil {
			return err
		}
	}
	for _, v := range pl.Volumes {
		if err := mkdirPrivate(filepath.Join(n.workdir, v)); err != nil {
			return fmt.Errorf("making volume %s: %w", v, err)
		}
	}
	n.mu.Lock()
	sup := n.sup
	n.sup = nil
	n.mu.Unlock()
	if sup != nil {
		p.log.Info("spec changed, restarting the node", "node", n.tenant+"/"+n.instance)
		sup.stop()
	}
	st := nodeState{Tenant: n.tenant, Instance: n.instance, Hash: hash, Plan: pl}
	if err := writeState(n.workdir, st); err != nil {
		return err
	}
	n.mu.Lock()
	n.st, n.known = st, true
	n.mu.Unlock()
	p.supervise(n, cfg, nil)
	return nil
}

// shutdown stops every node this run of the plugin supervises, all at once, and keeps
// their state: the host stopping cleanly stops its apps with it (before the managed
// servers they use), and the next run of the plugin restarts them from that state. A
// plugin that dies instead (a crash, SIGKILL) leaves its nodes running, to be adopted.
func (p *provider) shutdown() {
	p.mu.Lock()
	nodes := make([]*node, 0, len(p.nodes))
	for _, n := range p.nodes {
		nodes = append(nodes, n)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	stopped := 0
	for _, n := range nodes {
		n.mu.Lock()
		sup := n.sup
		n.sup = nil
		n.mu.Unlock()
		if sup == nil {
			continue
		}
		stopped++
		wg.Add(1)
		go func() {
			defer wg.Done()
			sup.stopWithin(shutdownGrace)
		}()
	}
	wg.Wait()
	p.log.Info("nodes stopped with the plugin; the next run restarts them", "nodes", stopped)
}

// supervise starts n's supervisor on its recorded plan; adopted is a running process.
func (p *provider) supervise(n *node, cfg settings, adopted *process) {
	n.mu.Lock()
	pl := n.st.Plan
	n.mu.Unlock()
	sup := newSupervisor(n.tenant+"/"+n.instance, n.workdir, pl, cfg, p.log, func(proc *process) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.st.PID, n.st.StartTime, n.st.StartedAt = proc.pid, proc.startTime, proc.startedAt
		if err := writeState(n.workdir, n.st); err != nil {
			p.log.Error("cannot record the node's process", "node", n.tenant+"/"+n.instance, "error", err)
		}
	})
	n.mu.Lock()
	n.sup = sup
	n.mu.Unlock()
	go sup.run(adopted)
}

// result waits for the node to be healthy and describes it. A node that does not become
// healthy in its start time gives a failed result and an error with the end of its
// stderr, with the request's secret values taken out.
func (p *provider) result(ctx context.Context, n *node, pl plan, secrets map[string][]byte) (resource.Result, error) {
	n.mu.Lock()
	sup := n.sup
	n.mu.Unlock()
	res := contract.InstanceResult{State: "running", Addresses: pl.addresses()}
	if !sup.waitReady(ctx) {
		sn := sup.snapshot()
		res.State = "failed"
		why := "the node did not become healthy in time"
		if sn.restarts >= crashLoop && !sn.running {
			why = fmt.Sprintf("the node did not become healthy: it ended %d times while starting", sn.restarts)
		}
		res.Message = scrub(fmt.Sprintf("%s: %s", why, orElse(sn.lastErr, "no check passed")), secrets)
		data, _ := json.Marshal(res)
		stderr := scrub(child.Tail(filepath.Join(n.workdir, "logs", "stderr.log"), 20), secrets)
		return resource.Result{Data: data}, sdk.Errorf(sdk.CodeInternal, "node %s/%s: %s; last lines of its stderr:\n%s", n.tenant, n.instance, res.Message, stderr)
	}
	data, err := json.Marshal(res)
	return resource.Result{Data: data}, err
}

func orElse(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// Deprovision stops the node's process group and removes its working dir; with Retain
// it keeps the volumes. The host suspends a node this way, and resumes it by provisioning.
func (p *provider) Deprovision(_ context.Context, req resource.DeprovisionRequest) error {
	if _, err := p.settings(); err != nil {
		return err
	}
	root, err := nodesRoot()
	if err != nil {
		return err
	}
	n := p.lockNode(root, req.Tenant, req.Instance)
	defer n.op.Unlock()
	n.mu.Lock()
	sup, st, known := n.sup, n.st, n.known
	n.sup = nil
	n.mu.Unlock()
	if sup != nil {
		sup.stop()
	}
	volumes := st.Plan.Volumes
	if !known {
		if spec, err := parseSpec(req.Spec); err == nil {
			for _, v := range spec.Volumes {
				volumes = append(volumes, filepath.Clean(v.Path))
			}
		}
	}
	if req.Retain {
		err = removeExcept(n.workdir, volumes)
	} else {
		err = os.RemoveAll(n.workdir)
		_ = os.Remove(filepath.Dir(n.workdir)) // the tenant's dir, when it is empty
	}
	if err != nil {
		return fmt.Errorf("removing the working dir of %s/%s: %w", req.Tenant, req.Instance, err)
	}
	p.forget(n)
	p.log.Info("node deprovisioned", "node", req.Tenant+"/"+req.Instance, "retain", req.Retain)
	return nil
}

// Status reports the node: ready (running and healthy), pending (starting), degraded
// (crashed or unhealthy) or missing (not provisioned, or only its retained volumes).
func (p *provider) Status(_ context.Context, req resource.Request) (resource.Status, error) {
	if _, err := p.settings(); err != nil {
		return resource.Status{}, err
	}
	root, err := nodesRoot()
	if err != nil {
		return resource.Status{}, err
	}
	workdir := filepath.Join(root, req.Tenant, req.Instance)
	var sup *supervisor
	var pl plan
	p.mu.Lock()
	n := p.nodes[req.Tenant+"/"+req.Instance]
	p.mu.Unlock()
	if n != nil {
		n.mu.Lock()
		sup, pl = n.sup, n.st.Plan
		n.mu.Unlock()
	}
	if sup == nil {
		res, _ := json.Marshal(contract.InstanceResult{State: "stopped", Addresses: map[string]string{}})
		msg := "the node is not provisioned"
		if _, err := os.Stat(workdir); err == nil {
			msg = "the node is stopped; only its volumes are kept"
		}
		return resource.Status{State: "missing", Message: msg, Data: res}, nil
	}
	sn := sup.snapshot()
	res := contract.InstanceResult{Addresses: pl.addresses()}
	var state string
	switch {
	case sn.running && sn.healthy:
		state, res.State = "ready", "running"
		res.Message = fmt.Sprintf("pid %d since %s", sn.pid, sn.startedAt.UTC().Format("2006-01-02T15:04:05Z"))
	case sn.starting:
		state, res.State = "pending", "starting"
		res.Message = fmt.Sprintf("pid %d is starting", sn.pid)
	default:
		state, res.State = "degraded", "failed"
		res.Message = orElse(sn.lastErr, "the node is not healthy")
	}
	if sn.restarts > 0 {
		res.Message += fmt.Sprintf(" (restarted %d times)", sn.restarts)
	}
	data, err := json.Marshal(res)
	return resource.Status{State: state, Message: res.Message, Data: data}, err
}

// lockNode returns the node of tenant/instance, known or new, holding its op lock. A node
// that a deprovision dropped while the caller waited is not returned.
func (p *provider) lockNode(root, tenant, instance string) *node {
	key := tenant + "/" + instance
	for {
		n := p.node(root, tenant, instance)
		n.op.Lock()
		p.mu.Lock()
		current := p.nodes[key] == n
		p.mu.Unlock()
		if current {
			return n
		}
		n.op.Unlock()
	}
}

// node returns the node of tenant/instance, known or new.
func (p *provider) node(root, tenant, instance string) *node {
	key := tenant + "/" + instance
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.nodes[key]
	if !ok {
		n = &node{tenant: tenant, instance: instance, workdir: filepath.Join(root, tenant, instance)}
		p.nodes[key] = n
	}
	return n
}

// forget drops a node that no longer runs, and its ports.
func (p *provider) forget(n *node) {
	key := n.tenant + "/" + n.instance
	p.mu.Lock()
	defer p.mu.Unlock()
	for port, owner := range p.ports {
		if owner == key {
			delete(p.ports, port)
		}
	}
	if p.nodes[key] == n {
		delete(p.nodes, key)
	}
}

// allocatePorts gives each named port of the node its recorded port, or a free loopback
// port of the range that no other node holds.
func (p *provider) allocatePorts(n *node, cfg settings, want []contract.Port) (map[string]int, error) {
	key := n.tenant + "/" + n.instance
	n.mu.Lock()
	recorded := n.st.Plan.Ports
	n.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, w := range want {
		if port, ok := recorded[w.Name]; ok && p.ports[port] == key {
			out[w.Name] = port
		}
	}
	size := cfg.PortHigh - cfg.PortLow + 1
	for _, w := range want {
		if _, ok := out[w.Name]; ok {
			continue
		}
		start := rand.IntN(size)
		found := 0
		for i := 0; i < size && found == 0; i++ {
			port := cfg.PortLow + (start+i)%size
			if _, taken := p.ports[port]; taken || !portFree(port) {
				continue
			}
			found = port
		}
		if found == 0 {
			return nil, sdk.LimitExceeded("no free loopback port is left in port_range %d-%d for port %q of %s: widen port_range", cfg.PortLow, cfg.PortHigh, w.Name, key)
		}
		p.ports[found] = key
		out[w.Name] = found
	}
	// Ports the node no longer declares go back to the pool.
	for port, owner := range p.ports {
		if owner != key {
			continue
		}
		kept := false
		for _, q := range out {
			kept = kept || q == port
		}
		if !kept {
			delete(p.ports, port)
		}
	}
	return out, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(loopback, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

var (
	_ resource.Provider       = (*provider)(nil)
	_ resource.Validator      = (*provider)(nil)
	_ resource.StatusReporter = (*provider)(nil)
	_ sdk.Configurer          = (*provider)(nil)
)
