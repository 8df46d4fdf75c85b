package main

import (
	"path/filepath"
	"time"
)

// adoptOnce runs adopt the first time the provider has its settings and data dir.
func (p *provider) adoptOnce() error {
	p.mu.Lock()
	if p.adopted {
		p.mu.Unlock()
		return nil
	}
	p.adopted = true
	cfg := p.cfg
	p.mu.Unlock()
	root, err := nodesRoot()
	if err != nil {
		// Without a data dir there is nothing to adopt; calls that need it say so.
		return nil
	}
	p.adopt(root, cfg)
	return nil
}

// adopt takes over every node that a previous run of the plugin recorded: a process
// that still runs (same pid and start time) is watched again; any other is restarted
// from its recorded plan.
func (p *provider) adopt(root string, cfg settings) {
	paths, _ := filepath.Glob(filepath.Join(root, "*", "*", stateFile))
	for _, path := range paths {
		workdir := filepath.Dir(path)
		st, err := readState(workdir)
		if err != nil {
			p.log.Error("cannot read a node's state: leaving it alone", "dir", workdir, "error", err)
			continue
		}
		if st.Tenant+"/"+st.Instance != filepath.Base(filepath.Dir(workdir))+"/"+filepath.Base(workdir) {
			p.log.Error("a node's state names another node: leaving it alone", "dir", workdir)
			continue
		}
		n := p.node(root, st.Tenant, st.Instance)
		n.mu.Lock()
		n.st, n.known = st, true
		n.mu.Unlock()
		key := st.Tenant + "/" + st.Instance
		p.mu.Lock()
		for _, port := range st.Plan.Ports {
			p.ports[port] = key
		}
		p.mu.Unlock()
		var proc *process
		if st.PID > 0 && alive(st.PID, st.StartTime) {
			proc = adoptProcess(st.PID, st.StartTime, orNow(st.StartedAt))
			p.log.Info("adopted a running node", "node", key, "pid", st.PID)
		} else {
			p.log.Info("restarting a recorded node whose process is gone", "node", key, "pid", st.PID)
		}
		p.supervise(n, cfg, proc)
	}
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}
