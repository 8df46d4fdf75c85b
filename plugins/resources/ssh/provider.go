package main

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path"
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

// Ports the driver allocates on a machine.
const portLow, portHigh = 20000, 29999

type provider struct {
	log hclog.Logger

	mu         sync.Mutex
	cfg        settings
	configured bool
	conns      map[string]*conn       // by machine name
	ops        map[string]*sync.Mutex // one operation per tenant/instance at a time
	reserved   map[string]int         // machine/port -> allocated by this run, while provisioning
	// states are the nodes' states as this plugin last wrote or read them, by
	// tenant/instance: Exec uses one after the machine says its hash is still the one.
	states map[string]nodeState
}

func newProvider() *provider {
	return &provider{log: hclog.Default(), conns: map[string]*conn{}, ops: map[string]*sync.Mutex{}, reserved: map[string]int{}, states: map[string]nodeState{}}
}

func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseSettings(raw)
	if err != nil {
		return err
	}
	p.closeAll()
	p.mu.Lock()
	p.cfg, p.configured = cfg, true
	p.conns = map[string]*conn{}
	p.mu.Unlock()
	names := make([]string, len(cfg.Machines))
	for i, m := range cfg.Machines {
		names[i] = m.Name
	}
	p.log.Info("configured", "machines", strings.Join(names, ","))
	return nil
}

func (p *provider) settings() (settings, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.configured {
		return settings{}, sdk.Invalid("settings", "the ssh instance driver needs its settings (machines, private_key_file): configure it")
	}
	return p.cfg, nil
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
	if !plainName.MatchString(tenant) || !plainName.MatchString(instance) {
		return sdk.Invalid("request", "tenant and instance names must be plain names to be directories on the machine")
	}
	return nil
}

func (p *provider) Validate(_ context.Context, _ string, raw json.RawMessage) error {
	spec, err := parseSpec(raw)
	if err != nil {
		return err
	}
	_, err = checkSpec(spec)
	return err
}

// nodeState is .fedhost/state.json on the machine.
type nodeState struct {
	Hash  string `json:"hash"`
	Plan  plan   `json:"plan"`
	Files []string
}

// remoteView is what one inspection of the machine says about a node.
type remoteView struct {
	state     *nodeState
	alive     bool
	stamp     string
	listening map[int]bool
	taken     map[int]bool // ports other nodes of the machine hold
}

func (p *provider) inspect(ctx context.Context, cfg settings, m *machine, wd, bin string) (remoteView, error) {
	script := fmt.Sprintf(`wd=%s
echo '@@state'; cat "$wd/.fedhost/state.json" 2>/dev/null; echo
%s
echo '@@alive'; if pg=$(cat "$wd/.fedhost/supervisor.pid" 2>/dev/null) && alive "$pg"; then echo yes; fi
echo '@@stamp'; stat -c '%%s-%%Y' %s 2>/dev/null
echo '@@listening'; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null
echo '@@taken'; for f in %s/*/*/.fedhost/ports; do [ "$f" = "$wd/.fedhost/ports" ] || cat "$f" 2>/dev/null; done
true
`, shq(wd), aliveFunc, shq(bin), shq(m.WorkDir))
	out, err := p.run(ctx, cfg, m, script)
	if err != nil {
		return remoteView{}, err
	}
	sections := map[string]string{}
	var cur string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "@@") {
			cur = line[2:]
			continue
		}
		sections[cur] += line + "\n"
	}
	v := remoteView{alive: strings.TrimSpace(sections["alive"]) == "yes", stamp: strings.TrimSpace(sections["stamp"]),
		listening: listeningPorts(sections["listening"]), taken: map[int]bool{}}
	if s := strings.TrimSpace(sections["state"]); s != "" {
		var st nodeState
		if json.Unmarshal([]byte(s), &st) == nil {
			v.state = &st
		}
	}
	for _, f := range strings.Fields(sections["taken"]) {
		if n, err := strconv.Atoi(f); err == nil {
			v.taken[n] = true
		}
	}
	return v, nil
}

func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	cfg, err := p.settings()
	if err != nil {
		return resource.Result{}, err
	}
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return resource.Result{}, err
	}
	spec, err := parseSpec(req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	volumes, err := checkSpec(spec)
	if err != nil {
		return resource.Result{}, err
	}
	files, err := resolveFiles(spec, req.Secrets)
	if err != nil {
		return resource.Result{}, err
	}
	key := req.Tenant + "/" + req.Instance
	defer p.lock(key)()
	m := cfg.place(req.Tenant, req.Instance)
	wd := path.Join(m.WorkDir, req.Tenant, req.Instance)
	bin := path.Join(m.ArtifactsDir, spec.Artifact.Binary)
	v, err := p.inspect(ctx, cfg, m, wd, bin)
	if err != nil {
		return resource.Result{}, fmt.Errorf("node %s: %s", key, scrub(err.Error(), req.Secrets))
	}
	if v.stamp == "" {
		return resource.Result{}, sdk.Invalid("request/artifact/binary", "machine %q has no binary %q in its artifacts_dir %s: copy it there", m.Name, spec.Artifact.Binary, m.ArtifactsDir)
	}
	ports, release, err := p.allocatePorts(m, v, spec.Ports)
	if err != nil {
		return resource.Result{}, err
	}
	defer release()
	args, env, err := expandAll(spec, wd, m.ListenHost, ports)
	if err != nil {
		return resource.Result{}, err
	}
	pl := plan{Machine: m.Name, Binary: bin, BinaryStamp: v.stamp, Args: args, Env: env, Files: map[string]string{},
		Ports: ports, Volumes: volumes, Health: healthWithDefaults(spec.Health), ListenHost: m.ListenHost}
	for name, content := range files {
		pl.Files[name] = sha256hex(content)
	}
	hash := pl.hash()
	if !(v.alive && v.state != nil && v.state.Hash == hash) {
		if err := p.apply(ctx, cfg, m, wd, pl, hash, v.state, files); err != nil {
			return resource.Result{}, fmt.Errorf("node %s: %s", key, scrub(err.Error(), req.Secrets))
		}
		p.log.Info("node started", "node", key, "machine", m.Name)
	}
	p.remember(key, &nodeState{Hash: hash, Plan: pl})
	res := contract.InstanceResult{State: "running", Addresses: pl.addresses()}
	if herr := waitHealthy(ctx, pl); herr != nil {
		tail, _ := p.run(ctx, cfg, m, fmt.Sprintf("tail -n 20 %s", shq(path.Join(wd, "logs", "node.log"))))
		res.State, res.Message = "failed", truncate(scrub(herr.Error(), req.Secrets), 512)
		data, _ := json.Marshal(res)
		return resource.Result{Data: data}, sdk.Errorf(sdk.CodeInternal, "node %s on machine %q did not become healthy: %s; last lines of its log:\n%s",
			key, m.Name, res.Message, truncate(scrub(string(tail), req.Secrets), 4096))
	}
	data, err := json.Marshal(res)
	return resource.Result{Data: data}, err
}

// apply stops the node's previous process, lays out its working dir, writes its files,
// its run script and state, and starts its supervisor.
func (p *provider) apply(ctx context.Context, cfg settings, m *machine, wd string, pl plan, hash string, old *nodeState, files map[string][]byte) error {
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\numask 077\nwd=%s\n%s\n%s\n", shq(wd), aliveFunc, stopScript)
	b.WriteString(`mkdir -p "$wd/.fedhost" "$wd/logs" "$wd/tmp"` + "\n")
	for _, vol := range pl.Volumes {
		fmt.Fprintf(&b, "mkdir -p \"$wd\"/%s\n", shq(vol))
	}
	if old != nil {
		for _, f := range old.Files {
			if _, ok := files[f]; !ok {
				fmt.Fprintf(&b, "rm -f \"$wd\"/%s\n", shq(f))
			}
		}
	}
	// The files go in the script as base64 here-documents: the script goes over stdin,
	// so their contents (secrets filled in) are never on a command line.
	delim, err := randomDelimiter()
	if err != nil {
		return err
	}
	for _, name := range names {
		tmp := shq(name + ".tmp")
		fmt.Fprintf(&b, "base64 -d > \"$wd\"/%s <<'%s'\n%s\n%s\nchmod 600 \"$wd\"/%s\nmv -f \"$wd\"/%s \"$wd\"/%s\n",
			tmp, delim, wrap(base64.StdEncoding.EncodeToString(files[name]), 76), delim, tmp, tmp, shq(name))
	}
	st := nodeState{Hash: hash, Plan: pl, Files: names}
	stJSON, _ := json.Marshal(st)
	var portList []string
	for _, port := range pl.Ports {
		portList = append(portList, strconv.Itoa(port))
	}
	var run strings.Builder
	fmt.Fprintf(&run, "cd %s || exit 1\nexec env -i", shq(wd))
	envNames := make([]string, 0, len(pl.Env))
	for k := range pl.Env {
		envNames = append(envNames, k)
	}
	sort.Strings(envNames)
	for _, k := range envNames {
		run.WriteString(" " + shq(k+"="+pl.Env[k]))
	}
	run.WriteString(" " + shq(pl.Binary))
	for _, a := range pl.Args {
		run.WriteString(" " + shq(a))
	}
	run.WriteString("\n")
	fmt.Fprintf(&b, `cd "$wd"
printf '%%s' %s > .fedhost/run.sh
printf '%%s\n' %s > .fedhost/ports
printf '%%s' %s > .fedhost/state.json
rm -f .fedhost/supervisor.pid
nohup setsid sh -c 'echo $$ > .fedhost/supervisor.pid; while :; do echo "fedhost: starting at $(date -u +%%FT%%TZ)"; sh .fedhost/run.sh; echo "fedhost: exited with status $? at $(date -u +%%FT%%TZ)"; sleep 1; done >> logs/node.log 2>&1' </dev/null >/dev/null 2>&1 &
i=0; while [ ! -s .fedhost/supervisor.pid ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
[ -s .fedhost/supervisor.pid ]
`, shq(run.String()), shq(strings.Join(portList, "\n")), shq(string(stJSON)))
	if _, err := p.run(ctx, cfg, m, b.String()); err != nil {
		return fmt.Errorf("laying out the working dir %s and starting its supervisor: %w", wd, err)
	}
	return nil
}

// aliveFunc defines alive PGID: whether a process of that group is there and not a
// zombie (an ended process whose parent, init, has not reaped it yet), read from /proc.
const aliveFunc = `alive() { cat /proc/[0-9]*/stat 2>/dev/null | awk -v pg="$1" '{ sub(/^.*\) /, ""); if ($3 == pg && $1 != "Z") f = 1 } END { exit !f }'; }`

// stopScript ends the supervisor of the node in $wd and its process group: TERM, up to
// 10 seconds, then KILL.
const stopScript = `if pg=$(cat "$wd/.fedhost/supervisor.pid" 2>/dev/null) && [ -n "$pg" ]; then
  kill -s TERM -- -"$pg" 2>/dev/null || true
  i=0; while alive "$pg" && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  kill -s KILL -- -"$pg" 2>/dev/null || true
  rm -f "$wd/.fedhost/supervisor.pid"
fi`

// allocatePorts keeps each named port's recorded port and gives new names a port of
// the range that nothing listens on, no other node of the machine holds and no
// concurrent provision of this run is giving out.
func (p *provider) allocatePorts(m *machine, v remoteView, want []contract.Port) (map[string]int, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	var mine []string
	for _, w := range want {
		if v.state != nil {
			if port, ok := v.state.Plan.Ports[w.Name]; ok && !v.taken[port] {
				out[w.Name] = port
				continue
			}
		}
		size := portHigh - portLow + 1
		start := rand.IntN(size)
		for i := 0; i < size; i++ {
			port := portLow + (start+i)%size
			k := m.Name + "/" + strconv.Itoa(port)
			if v.listening[port] || v.taken[port] || p.reserved[k] > 0 || used(out, port) {
				continue
			}
			p.reserved[k]++
			mine = append(mine, k)
			out[w.Name] = port
			break
		}
		if _, ok := out[w.Name]; !ok {
			return nil, func() {}, sdk.LimitExceeded("machine %q has no free port left in %d-%d", m.Name, portLow, portHigh)
		}
	}
	return out, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, k := range mine {
			if p.reserved[k]--; p.reserved[k] <= 0 {
				delete(p.reserved, k)
			}
		}
	}, nil
}

// randomDelimiter is a here-document delimiter no base64 text can contain.
func randomDelimiter() (string, error) {
	b := make([]byte, 16)
	if _, err := crand.Read(b); err != nil {
		return "", err
	}
	return "FEDHOST_EOF_" + hex.EncodeToString(b), nil
}

// wrap breaks s into lines of n characters.
func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

func used(ports map[string]int, port int) bool {
	for _, q := range ports {
		if q == port {
			return true
		}
	}
	return false
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

// check runs the node's health check once: an HTTP GET answering 2xx or 3xx, or a TCP
// connect, to listen_host:port within the check's timeout.
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

// Deprovision stops the node's process group and removes its working dir; with Retain
// it removes the driver's files, the logs, tmp and the node's files and keeps the rest
// (the volumes).
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	cfg, err := p.settings()
	if err != nil {
		return err
	}
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return err
	}
	key := req.Tenant + "/" + req.Instance
	defer p.lock(key)()
	m := cfg.place(req.Tenant, req.Instance)
	wd := path.Join(m.WorkDir, req.Tenant, req.Instance)
	var b strings.Builder
	fmt.Fprintf(&b, "wd=%s\n%s\n%s\n", shq(wd), aliveFunc, stopScript)
	if req.Retain {
		b.WriteString(`if [ -d "$wd" ]; then cd "$wd" && rm -rf .fedhost/state.json logs tmp; fi` + "\n")
		if spec, err := parseSpec(req.Spec); err == nil {
			for name := range spec.Files {
				if plainName.MatchString(name) {
					fmt.Fprintf(&b, "rm -f \"$wd\"/%s\n", shq(name))
				}
			}
		}
		b.WriteString(`rm -rf "$wd/.fedhost"` + "\n")
	} else {
		fmt.Fprintf(&b, "rm -rf \"$wd\"\nrmdir %s 2>/dev/null || true\n", shq(path.Dir(wd)))
	}
	p.remember(key, nil)
	if _, err := p.run(ctx, cfg, m, b.String()); err != nil {
		return fmt.Errorf("deprovisioning node %s: %w", key, err)
	}
	p.log.Info("node deprovisioned", "node", key, "machine", m.Name, "retain", req.Retain)
	return nil
}

// Status inspects the node on its machine and runs its health check once.
func (p *provider) Status(ctx context.Context, req resource.Request) (resource.Status, error) {
	cfg, err := p.settings()
	if err != nil {
		return resource.Status{}, err
	}
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return resource.Status{}, err
	}
	m := cfg.place(req.Tenant, req.Instance)
	wd := path.Join(m.WorkDir, req.Tenant, req.Instance)
	v, err := p.inspect(ctx, cfg, m, wd, "/nonexistent")
	if err != nil {
		return resource.Status{}, err
	}
	if v.state == nil || !v.alive {
		data, _ := json.Marshal(contract.InstanceResult{State: "stopped", Addresses: map[string]string{}})
		return resource.Status{State: "missing", Message: fmt.Sprintf("the node is not running on machine %q", m.Name), Data: data}, nil
	}
	res := contract.InstanceResult{State: "running", Addresses: v.state.Plan.addresses(), Message: "running on machine " + m.Name}
	state := "ready"
	if v.state.Plan.Health != nil {
		if err := check(ctx, v.state.Plan); err != nil {
			state, res.State, res.Message = "degraded", "failed", truncate("health check failed: "+err.Error(), 512)
		}
	}
	data, err := json.Marshal(res)
	return resource.Status{State: state, Message: res.Message, Data: data}, err
}

// remember keeps the node's state for Exec, or forgets it (nil).
func (p *provider) remember(key string, st *nodeState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st == nil {
		delete(p.states, key)
		return
	}
	p.states[key] = *st
}

func (p *provider) remembered(key string) (nodeState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.states[key]
	return st, ok
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
