package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// Instance status codes of the Incus API.
const statusRunning = 103

// Config keys the driver keeps on its instances: which node an instance is and the
// hash of its effective spec. Neither holds a secret.
const (
	keyNode = "user.fedhost.node"
	keyHash = "user.fedhost.hash"
)

const (
	unitName = "fedhost-node.service"
	unitDir  = "/etc/systemd/system"
)

type provider struct {
	log hclog.Logger

	mu         sync.Mutex
	cfg        settings
	api        *apiClient
	configured bool
	checked    bool                   // the server answered GET /1.0 as trusted
	extensions map[string]bool        // its api_extensions
	ops        map[string]*sync.Mutex // one operation per tenant/instance at a time
	reserved   map[int]int            // ports this run is giving out, while provisioning
}

func newProvider() *provider {
	return &provider{log: hclog.Default(), ops: map[string]*sync.Mutex{}, reserved: map[int]int{}}
}

func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, api, err := parseSettings(raw)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.cfg, p.api, p.configured, p.checked = cfg, api, true, false
	p.mu.Unlock()
	p.log.Info("configured", "server", cfg.host, "project", cfg.Project)
	return nil
}

var errNotConfigured = sdk.Invalid("settings", "the incus instance driver needs its settings (url, client_cert_file, client_key_file, server_cert_file or ca_file, listen_host): configure it")

// settings returns the settings and the API client once the server has answered
// GET /1.0 as trusting the driver's certificate.
func (p *provider) settings(ctx context.Context) (settings, *apiClient, error) {
	p.mu.Lock()
	cfg, api, configured, checked := p.cfg, p.api, p.configured, p.checked
	p.mu.Unlock()
	if !configured {
		return cfg, nil, errNotConfigured
	}
	if checked {
		return cfg, api, nil
	}
	var info struct {
		Auth       string   `json:"auth"`
		APIVersion string   `json:"api_version"`
		Extensions []string `json:"api_extensions"`
	}
	if err := api.get(ctx, "/1.0", nil, &info); err != nil {
		return cfg, nil, serverError(cfg, "GET /1.0", err)
	}
	if info.Auth != "trusted" {
		return cfg, nil, sdk.Errorf(sdk.CodeUnavailable, "the Incus server at %s does not trust client_cert_file: add it there with incus config trust add-certificate, for project %s", cfg.host, cfg.Project)
	}
	if info.APIVersion != "1.0" {
		return cfg, nil, sdk.Errorf(sdk.CodeUnavailable, "the Incus server at %s speaks API version %q; the driver speaks 1.0", cfg.host, bounded(info.APIVersion))
	}
	p.mu.Lock()
	p.checked, p.extensions = true, map[string]bool{}
	for _, e := range info.Extensions {
		p.extensions[e] = true
	}
	p.mu.Unlock()
	return cfg, api, nil
}

// ociExtensions are the API extensions an OCI application container with the driver's
// entrypoint and the image's user needs (doc/api-extensions.md).
var ociExtensions = []string{"instance_oci", "instance_oci_entrypoint"}

// supportsOCI refuses an OCI image on a server without the extensions it needs.
func (p *provider) supportsOCI(cfg settings) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range ociExtensions {
		if !p.extensions[e] {
			return sdk.Invalid("request/artifact/image", "the Incus server at %s does not run OCI images (it lacks the %s API extension): upgrade it, or give an images:ALIAS system container", cfg.host, e)
		}
	}
	return nil
}

// serverError names the server and what was asked; a certificate that is not the pinned
// one is refused with both fingerprints.
func serverError(cfg settings, what string, err error) error {
	var own *sdk.Error
	if errors.As(err, &own) {
		return err
	}
	var pin *pinError
	if errors.As(err, &pin) {
		return sdk.Errorf(sdk.CodeUnavailable, "%s", pin.Error())
	}
	var api *apiError
	if errors.As(err, &api) {
		if api.Code == http.StatusForbidden {
			return sdk.Errorf(sdk.CodeUnavailable, "the Incus server at %s refused %s (403 %s): trust client_cert_file there (incus config trust add-certificate) for project %s", cfg.host, what, api.Message, cfg.Project)
		}
		return fmt.Errorf("the Incus server at %s: %s: %w", cfg.host, what, api)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return sdk.Errorf(sdk.CodeUnavailable, "the Incus server at %s (settings url): %s: %v", cfg.host, what, err)
}

func (p *provider) lock(key string) func() {
	p.mu.Lock()
	m, ok := p.ops[key]
	if !ok {
		m = &sync.Mutex{}
		p.ops[key] = m
	}
	p.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func checkNames(tenant, instance string) error {
	if !sdk.ValidInstance(tenant) {
		return sdk.Invalid("tenant", "the tenant name is a DNS label (a-z, 0-9 and inner hyphens)")
	}
	if !sdk.ValidInstance(instance) {
		return sdk.Invalid("instance", "the instance name is a DNS label (a-z, 0-9 and inner hyphens)")
	}
	return nil
}

func (p *provider) Validate(_ context.Context, _ string, raw json.RawMessage) error {
	p.mu.Lock()
	cfg := p.cfg
	p.mu.Unlock()
	if cfg.NodeDir == "" {
		// Validation before Configure checks the spec against the defaults.
		cfg.NodeDir, cfg.ListenHost, cfg.SystemImageServer = "/srv/fedhost", "127.0.0.1", "https://images.linuxcontainers.org"
	}
	spec, err := parseSpec(raw)
	if err != nil {
		return err
	}
	_, _, err = checkSpec(spec, cfg)
	return err
}

// instance is what GET /1.0/instances/{name} answers, in the parts the driver reads.
type instance struct {
	Name           string                       `json:"name"`
	Status         string                       `json:"status"`
	StatusCode     int                          `json:"status_code"`
	Config         map[string]string            `json:"config"`
	ExpandedConfig map[string]string            `json:"expanded_config"`
	Devices        map[string]map[string]string `json:"devices"`
}

// find returns the instance, or nil when the server has none of that name.
func find(ctx context.Context, api *apiClient, name string) (*instance, error) {
	var in instance
	if err := api.get(ctx, instancePath(name), nil, &in); err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &in, nil
}

// plan is the effective spec of a node on the server, every placeholder resolved. Its
// hash decides whether a provision makes the instance again; it holds the hashes of
// the file contents, never the contents.
type plan struct {
	Image      string            `json:"image"`
	Source     imageSource       `json:"source"`
	System     bool              `json:"system"`
	Args       []string          `json:"args"`
	Env        map[string]string `json:"env"`
	Files      map[string]string `json:"files"`
	Ports      map[string]int    `json:"ports"`
	Volumes    []contract.Volume `json:"volumes"`
	Limits     *contract.Limits  `json:"limits,omitempty"`
	Health     *contract.Health  `json:"health,omitempty"`
	ListenHost string            `json:"listen_host"`
	NodeDir    string            `json:"node_dir"`
	Profiles   []string          `json:"profiles"`
	Pool       string            `json:"pool"`
	Network    string            `json:"network"`
}

func (pl plan) hash() string {
	b, _ := json.Marshal(pl)
	return sha256hex(b)
}

func (pl plan) addresses() map[string]string {
	out := map[string]string{}
	for name, port := range pl.Ports {
		out[name] = net.JoinHostPort(pl.ListenHost, strconv.Itoa(port))
	}
	return out
}

// body is the POST /1.0/instances request of the plan's instance (InstancesPost).
func (pl plan) body(name, node, hash string) map[string]any {
	config := map[string]string{keyNode: node, keyHash: hash}
	for k, v := range pl.Env {
		config["environment."+k] = v
	}
	if !pl.System && len(pl.Args) > 0 {
		config["oci.entrypoint"] = "/bin/sh " + path.Join(pl.NodeDir, metaDir, "run.sh")
	}
	if pl.Limits != nil {
		if pl.Limits.MemoryMB > 0 {
			config["limits.memory"] = strconv.Itoa(pl.Limits.MemoryMB) + "MiB"
		}
		if pl.Limits.CPUMillis > 0 {
			// A share of 100 ms periods: 500 millis is 50ms/100ms, half a CPU.
			config["limits.cpu.allowance"] = strconv.Itoa(max(1, pl.Limits.CPUMillis/10)) + "ms/100ms"
		}
	}
	devices := map[string]map[string]string{"root": {"type": "disk", "path": "/", "pool": pl.Pool}}
	if pl.Network != "" {
		devices["eth0"] = map[string]string{"type": "nic", "network": pl.Network, "name": "eth0"}
	}
	for name, port := range pl.Ports {
		devices["port-"+name] = map[string]string{"type": "proxy", "bind": "host",
			"listen":  "tcp:" + net.JoinHostPort(pl.ListenHost, strconv.Itoa(port)),
			"connect": "tcp:" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	}
	for _, v := range pl.Volumes {
		devices["vol-"+v.Name] = map[string]string{"type": "disk", "pool": pl.Pool, "source": volumeName(name, v.Name), "path": volumePath(v.Path, pl.NodeDir)}
	}
	return map[string]any{"name": name, "type": "container", "source": pl.Source, "profiles": pl.Profiles,
		"config": config, "devices": devices, "start": false}
}

func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return resource.Result{}, err
	}
	p.mu.Lock()
	cfg, configured := p.cfg, p.configured
	p.mu.Unlock()
	if !configured {
		return resource.Result{}, errNotConfigured
	}
	spec, err := parseSpec(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	src, system, err := checkSpec(spec, cfg)
	if err != nil {
		return resource.Result{}, err
	}
	files, err := resolveFiles(spec, req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	cfg, api, err := p.settings(ctx)
	if err != nil {
		return resource.Result{}, err
	}
	if !system {
		if err := p.supportsOCI(cfg); err != nil {
			return resource.Result{}, err
		}
	}
	node := req.Tenant + "/" + req.Instance
	defer p.lock(node)()
	name := instanceName(req.Tenant, req.Instance)
	cur, err := find(ctx, api, name)
	if err != nil {
		return resource.Result{}, serverError(cfg, "GET instance "+name, err)
	}
	// A port some other program holds on the Incus machine fails the start; the driver
	// then gives that port up and tries again, with up to maxPortRetries other ports.
	avoid := map[int]bool{}
	var pl plan
	for attempt := 0; ; attempt++ {
		var busy string
		pl, busy, err = p.provisionOnce(ctx, api, cfg, name, node, cur, spec, src, system, files, avoid)
		if err == nil {
			break
		}
		if busy == "" || attempt == maxPortRetries {
			return resource.Result{}, scrubError(err, req.Secrets)
		}
		p.log.Info("port taken on the Incus machine, trying another", "node", node, "port", pl.Ports[busy])
		avoid[pl.Ports[busy]] = true
		if cur, err = find(ctx, api, name); err != nil {
			return resource.Result{}, serverError(cfg, "GET instance "+name, err)
		}
	}
	res := contract.InstanceResult{State: "running", Addresses: pl.addresses()}
	if herr := waitHealthy(ctx, pl); herr != nil {
		tail := consoleTail(ctx, api, name, 20)
		res.State, res.Message = "failed", truncate(scrub(herr.Error(), req.Secrets), 512)
		data, _ := json.Marshal(res)
		return resource.Result{Data: data}, sdk.Errorf(sdk.CodeInternal, "node %s (instance %s on %s) did not become healthy: %s; last lines of its console log:\n%s",
			node, name, cfg.host, res.Message, truncate(scrub(tail, req.Secrets), 4096))
	}
	data, err := json.Marshal(res)
	return resource.Result{Data: data}, err
}

// scrubError takes every secret value out of err's message, keeping its code and field.
func scrubError(err error, secrets map[string][]byte) error {
	var e *sdk.Error
	if errors.As(err, &e) {
		return &sdk.Error{Code: e.Code, Field: e.Field, Message: scrub(e.Message, secrets)}
	}
	return errors.New(scrub(err.Error(), secrets))
}

// maxPortRetries is how many times a provision takes other ports when one is taken.
const maxPortRetries = 3

// provisionOnce allocates the node's ports (none of avoid), makes its effective spec
// and, when the instance does not run with that spec, makes the instance anew. When the
// start failed because a proxy device could not listen, busy names that port.
func (p *provider) provisionOnce(ctx context.Context, api *apiClient, cfg settings, name, node string, cur *instance, spec contract.InstanceRequest,
	src imageSource, system bool, files map[string][]byte, avoid map[int]bool) (pl plan, busy string, err error) {
	ports, release, err := p.allocatePorts(ctx, api, cfg, cur, spec.Ports, avoid)
	if err != nil {
		return pl, "", serverError(cfg, "listing the instances of project "+cfg.Project, err)
	}
	defer release()
	args, env, err := expandAll(spec, cfg.NodeDir, cfg.ListenHost, ports)
	if err != nil {
		return pl, "", err
	}
	pl = plan{Image: spec.Artifact.Image, Source: src, System: system, Args: args, Env: env, Files: map[string]string{},
		Ports: ports, Volumes: spec.Volumes, Limits: spec.Limits, Health: healthWithDefaults(spec.Health),
		ListenHost: cfg.ListenHost, NodeDir: cfg.NodeDir, Profiles: cfg.Profiles, Pool: cfg.StoragePool, Network: cfg.Network}
	for n, content := range files {
		pl.Files[n] = sha256hex(content)
	}
	hash := pl.hash()
	if cur != nil && cur.Config[keyHash] == hash && cur.StatusCode == statusRunning {
		return pl, "", nil
	}
	if err := p.apply(ctx, api, cfg, name, node, hash, pl, cur, files); err != nil {
		return pl, busyPort(err, ports), err
	}
	p.log.Info("node started", "node", node, "instance", name)
	return pl, "", nil
}

// busyDevice is how incusd names a device that failed to start (driver_lxc.go).
var busyDevice = regexp.MustCompile(`Failed to start device "port-([a-z][a-z0-9-]{0,14})"`)

// busyPort names the port whose proxy device could not start, if that failed a start.
func busyPort(err error, ports map[string]int) string {
	var api *apiError
	if !errors.As(err, &api) {
		return ""
	}
	m := busyDevice.FindStringSubmatch(api.Message)
	if m == nil {
		return ""
	}
	if _, ok := ports[m[1]]; !ok {
		return ""
	}
	return m[1]
}

// apply makes the node's instance anew: it removes the old one (its volumes stay),
// makes the volumes, creates the instance from its image, writes node_dir, the files
// and the run script into it, and starts it.
func (p *provider) apply(ctx context.Context, api *apiClient, cfg settings, name, node, hash string, pl plan, cur *instance, files map[string][]byte) error {
	if cur != nil {
		if err := remove(ctx, api, cur); err != nil {
			return serverError(cfg, "removing the previous instance "+name, err)
		}
	}
	for _, v := range pl.Volumes {
		body := map[string]any{"name": volumeName(name, v.Name), "type": "custom", "content_type": "filesystem", "config": map[string]string{}}
		if v.SizeMB > 0 {
			body["config"] = map[string]string{"size": strconv.Itoa(v.SizeMB) + "MiB"}
		}
		err := api.do(ctx, http.MethodPost, "/1.0/storage-pools/"+cfg.StoragePool+"/volumes/custom", body, nil)
		if err != nil && !isConflict(err) {
			return serverError(cfg, fmt.Sprintf("creating volume %s of request/volumes in storage_pool %s", v.Name, cfg.StoragePool), err)
		}
	}
	if err := api.do(ctx, http.MethodPost, "/1.0/instances", pl.body(name, node, hash), nil); err != nil {
		var aerr *apiError
		if errors.As(err, &aerr) && strings.Contains(strings.ToLower(aerr.Message), "image") {
			return sdk.Invalid("request/artifact/image", "the Incus server at %s cannot create instance %s from image %q: %s: check the image's name and tag, and that the server can reach its registry",
				cfg.host, name, pl.Image, aerr.Message)
		}
		return serverError(cfg, fmt.Sprintf("creating instance %s from request/artifact/image %q", name, pl.Image), err)
	}
	in, err := find(ctx, api, name)
	if err != nil {
		return serverError(cfg, "reading the new instance "+name, err)
	}
	if in == nil {
		return fmt.Errorf("the Incus server at %s: instance %s is not there after its create operation succeeded", cfg.host, name)
	}
	// The node's process runs as the image's user (oci.uid and oci.gid, which Incus sets
	// from the image's config); its files must be readable by it, and by no one else.
	owner := fileOwner{uid: in.ExpandedConfig["oci.uid"], gid: in.ExpandedConfig["oci.gid"]}
	if pl.System {
		owner = fileOwner{}
	}
	put := func(p string, content []byte, mode, typ string, o fileOwner) error {
		if err := pushFile(ctx, api, name, p, content, mode, typ, o); err != nil {
			return serverError(cfg, "writing "+p+" into instance "+name, err)
		}
		return nil
	}
	dir := ""
	for _, part := range strings.Split(strings.TrimPrefix(cfg.NodeDir, "/"), "/") {
		dir += "/" + part
		o := fileOwner{}
		if dir == cfg.NodeDir {
			o = owner
		}
		if err := put(dir, nil, "0755", "directory", o); err != nil {
			return err
		}
	}
	if err := put(path.Join(cfg.NodeDir, metaDir), nil, "0700", "directory", owner); err != nil {
		return err
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := put(path.Join(cfg.NodeDir, n), files[n], "0600", "file", owner); err != nil {
			return err
		}
	}
	script := path.Join(cfg.NodeDir, metaDir, "run.sh")
	if len(pl.Args) > 0 {
		if err := put(script, []byte(runScript(pl.Args, pl.Env, cfg.NodeDir, pl.System)), "0700", "file", owner); err != nil {
			return err
		}
	}
	if pl.System {
		if err := put(path.Join(unitDir, unitName), []byte(systemdUnit(script)), "0644", "file", fileOwner{}); err != nil {
			return err
		}
		if err := put(path.Join(unitDir, "multi-user.target.wants", unitName), []byte("../"+unitName), "0777", "symlink", fileOwner{}); err != nil {
			return err
		}
	}
	if err := api.do(ctx, http.MethodPut, instancePath(name, "state"), map[string]any{"action": "start", "timeout": 30}, nil); err != nil {
		return serverError(cfg, "starting instance "+name, err)
	}
	return nil
}

type fileOwner struct{ uid, gid string }

// pushFile writes one file, directory or symlink with the files API
// (POST /1.0/instances/{name}/files?path=...).
func pushFile(ctx context.Context, api *apiClient, name, p string, content []byte, mode, typ string, o fileOwner) error {
	h := http.Header{}
	h.Set("X-Incus-type", typ)
	h.Set("X-Incus-mode", mode)
	h.Set("X-Incus-write", "overwrite")
	h.Set("X-Incus-uid", orZero(o.uid))
	h.Set("X-Incus-gid", orZero(o.gid))
	r, err := api.call(ctx, http.MethodPost, instancePath(name, "files"), url.Values{"path": {p}}, bytes.NewReader(content), h)
	if err != nil {
		return err
	}
	if r.Type == "async" {
		return api.wait(ctx, r.Operation)
	}
	return nil
}

func orZero(s string) string {
	if _, err := strconv.ParseUint(s, 10, 32); err != nil {
		return "0"
	}
	return s
}

// remove stops the instance (forced) and deletes it.
func remove(ctx context.Context, api *apiClient, in *instance) error {
	if in.StatusCode == statusRunning {
		err := api.do(ctx, http.MethodPut, instancePath(in.Name, "state"), map[string]any{"action": "stop", "force": true, "timeout": 30}, nil)
		if err != nil && !isNotFound(err) {
			return err
		}
	}
	if err := api.do(ctx, http.MethodDelete, instancePath(in.Name), nil, nil); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// allocatePorts keeps the ports of the node's proxy devices and gives new names a port
// of the range that no proxy device of the project listens on and no concurrent
// provision of this run is giving out.
func (p *provider) allocatePorts(ctx context.Context, api *apiClient, cfg settings, cur *instance, want []contract.Port, avoid map[int]bool) (map[string]int, func(), error) {
	out := map[string]int{}
	var missing []string
	for _, w := range want {
		if cur != nil {
			if port, ok := proxyPort(cur.Devices["port-"+w.Name]); ok && !avoid[port] {
				out[w.Name] = port
				continue
			}
		}
		missing = append(missing, w.Name)
	}
	if len(missing) == 0 {
		return out, func() {}, nil
	}
	var all []instance
	if err := api.get(ctx, "/1.0/instances", url.Values{"recursion": {"1"}}, &all); err != nil {
		return nil, nil, err
	}
	taken := map[int]bool{}
	for port := range avoid {
		taken[port] = true
	}
	for _, in := range all {
		for _, d := range in.Devices {
			if port, ok := proxyPort(d); ok {
				taken[port] = true
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var mine []int
	for _, n := range missing {
		size := cfg.PortHigh - cfg.PortLow + 1
		start := rand.IntN(size)
		for i := 0; i < size; i++ {
			port := cfg.PortLow + (start+i)%size
			if taken[port] || p.reserved[port] > 0 || used(out, port) {
				continue
			}
			p.reserved[port]++
			mine = append(mine, port)
			out[n] = port
			break
		}
		if _, ok := out[n]; !ok {
			return nil, nil, sdk.LimitExceeded("project %s has no free port left in port_range %d-%d: widen it", api.project, cfg.PortLow, cfg.PortHigh)
		}
	}
	return out, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, port := range mine {
			if p.reserved[port]--; p.reserved[port] <= 0 {
				delete(p.reserved, port)
			}
		}
	}, nil
}

// proxyPort is the port a proxy device listens on ("tcp:host:port").
func proxyPort(d map[string]string) (int, bool) {
	if d["type"] != "proxy" {
		return 0, false
	}
	addr, ok := strings.CutPrefix(d["listen"], "tcp:")
	if !ok {
		return 0, false
	}
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	port, err := strconv.Atoi(ps)
	return port, err == nil && port > 0 && port < 65536
}

func used(ports map[string]int, port int) bool {
	for _, q := range ports {
		if q == port {
			return true
		}
	}
	return false
}

// consoleTail is the last n lines of the instance's console log (its process's output),
// or why it could not be read.
func consoleTail(ctx context.Context, api *apiClient, name string, n int) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.base+instancePath(name, "console")+"?"+url.Values{"project": {api.project}, "type": {"log"}}.Encode(), nil)
	if err != nil {
		return err.Error()
	}
	resp, err := api.http.Do(req)
	if err != nil {
		return "(the console log could not be read)"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode != http.StatusOK {
		if _, err := parseResponse(resp.StatusCode, b); err != nil {
			return "(the console log could not be read: " + err.Error() + ")"
		}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHealthy checks the node from this machine until a check passes or its start time
// is over. A node without a health check is taken as healthy once started.
func waitHealthy(ctx context.Context, pl plan) error {
	if pl.Health == nil {
		return nil
	}
	deadline := time.Now().Add(time.Duration(pl.Health.StartSeconds) * time.Second)
	for {
		err := check(ctx, pl)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no check passed in %ds: %v", pl.Health.StartSeconds, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// check runs the node's health check once, from the host through the proxy device: an
// HTTP GET answering 2xx or 3xx, or a TCP connect, within the check's timeout.
func check(ctx context.Context, pl plan) error {
	addr := net.JoinHostPort(pl.ListenHost, strconv.Itoa(pl.Ports[pl.Health.Port]))
	timeout := time.Duration(pl.Health.TimeoutSeconds) * time.Second
	if pl.Health.HTTPPath == "" {
		c, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+pl.Health.HTTPPath, nil)
	if err != nil {
		return err
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s answered %s", pl.Health.HTTPPath, resp.Status)
	}
	return nil
}

// Deprovision removes the node's instance and, unless Retain, its volumes.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return err
	}
	cfg, api, err := p.settings(ctx)
	if err != nil {
		return err
	}
	node := req.Tenant + "/" + req.Instance
	defer p.lock(node)()
	name := instanceName(req.Tenant, req.Instance)
	cur, err := find(ctx, api, name)
	if err != nil {
		return serverError(cfg, "GET instance "+name, err)
	}
	volumes := map[string]bool{}
	if cur != nil {
		for _, d := range cur.Devices {
			if d["type"] == "disk" && d["source"] != "" && d["pool"] == cfg.StoragePool && strings.HasPrefix(d["source"], name+"-") {
				volumes[d["source"]] = true
			}
		}
		if err := remove(ctx, api, cur); err != nil {
			return serverError(cfg, "removing instance "+name, err)
		}
	}
	if !req.Retain {
		if spec, err := parseSpec(req.Spec); err == nil {
			for _, v := range spec.Volumes {
				if sdk.ValidInstance(v.Name) {
					volumes[volumeName(name, v.Name)] = true
				}
			}
		}
		for v := range volumes {
			err := api.do(ctx, http.MethodDelete, "/1.0/storage-pools/"+cfg.StoragePool+"/volumes/custom/"+v, nil, nil)
			if err != nil && !isNotFound(err) {
				return serverError(cfg, "deleting volume "+v, err)
			}
		}
	}
	p.log.Info("node deprovisioned", "node", node, "instance", name, "retain", req.Retain)
	return nil
}

// Status reads the node's instance and runs its health check once.
func (p *provider) Status(ctx context.Context, req resource.Request) (resource.Status, error) {
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return resource.Status{}, err
	}
	cfg, api, err := p.settings(ctx)
	if err != nil {
		return resource.Status{}, err
	}
	name := instanceName(req.Tenant, req.Instance)
	cur, err := find(ctx, api, name)
	if err != nil {
		return resource.Status{}, serverError(cfg, "GET instance "+name, err)
	}
	if cur == nil || cur.StatusCode != statusRunning {
		data, _ := json.Marshal(contract.InstanceResult{State: "stopped", Addresses: map[string]string{}})
		return resource.Status{State: "missing", Message: fmt.Sprintf("instance %s is not running on %s", name, cfg.host), Data: data}, nil
	}
	pl := plan{ListenHost: cfg.ListenHost, Ports: map[string]int{}}
	for dev, d := range cur.Devices {
		if port, ok := proxyPort(d); ok && strings.HasPrefix(dev, "port-") {
			pl.Ports[strings.TrimPrefix(dev, "port-")] = port
		}
	}
	res := contract.InstanceResult{State: "running", Addresses: pl.addresses(), Message: "running as instance " + name}
	state := "ready"
	if spec, err := parseSpec(req.Spec); err == nil && spec.Health != nil {
		pl.Health = healthWithDefaults(spec.Health)
		if _, ok := pl.Ports[pl.Health.Port]; ok {
			if err := check(ctx, pl); err != nil {
				state, res.State, res.Message = "degraded", "failed", truncate("health check failed: "+err.Error(), 512)
			}
		}
	}
	data, err := json.Marshal(res)
	return resource.Status{State: state, Message: res.Message, Data: data}, err
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

var (
	_ resource.Provider       = (*provider)(nil)
	_ resource.Validator      = (*provider)(nil)
	_ resource.StatusReporter = (*provider)(nil)
	_ sdk.Configurer          = (*provider)(nil)
)
