package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Restart backoff: 1 s doubling to 1 min, back to 1 s after a run of a minute.
const (
	backoffMin   = time.Second
	backoffMax   = time.Minute
	backoffReset = time.Minute
	stopGrace    = 10 * time.Second
	// shutdownGrace is the SIGTERM-to-SIGKILL time of the nodes when the plugin stops:
	// the host's go-plugin client kills a plugin that has not exited 2 s after it asked
	// it to stop, and every node must be gone by then.
	shutdownGrace = 1500 * time.Millisecond
	rotateEvery   = time.Second
	startingCheck = 100 * time.Millisecond
)

// supervisor keeps one node's process running: it restarts it when it ends, checks its
// health and rotates its logs, until it is stopped.
type supervisor struct {
	name    string
	workdir string
	plan    plan
	log     hclog.Logger
	logMax  int64
	logKeep int
	// started is called with each new process, to record it.
	started func(*process)

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// grace is the SIGTERM-to-SIGKILL time of the stop; set before ctx is canceled.
	grace time.Duration

	mu       sync.Mutex
	proc     *process // nil while none runs
	healthy  bool     // the last check of the current process passed
	passed   bool     // a check of the current process has passed
	lastErr  string   // why the node is not healthy
	restarts int
}

// snapshot is the supervisor's view of its node at one moment.
type snapshot struct {
	pid       int
	running   bool
	healthy   bool
	starting  bool
	lastErr   string
	restarts  int
	startedAt time.Time
}

func newSupervisor(name, workdir string, pl plan, cfg settings, log hclog.Logger, started func(*process)) *supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	return &supervisor{
		name: name, workdir: workdir, plan: pl, log: log.With("node", name),
		logMax: cfg.LogMaxBytes, logKeep: cfg.LogKeep, started: started,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), grace: stopGrace,
	}
}

// run supervises until stop; adopted, if not nil, is a running process to watch first.
func (s *supervisor) run(adopted *process) {
	defer close(s.done)
	go s.healthLoop()
	go s.rotateLoop()
	backoff := backoffMin
	for {
		proc := adopted
		adopted = nil
		if proc == nil {
			var err error
			proc, err = startProcess(s.plan, s.workdir)
			if err != nil {
				s.log.Error("cannot start the node", "error", err, "retry_in", backoff)
				s.setExited(err.Error())
				if !s.sleep(backoff) {
					return
				}
				backoff = min(backoff*2, backoffMax)
				continue
			}
			s.log.Info("node started", "pid", proc.pid)
		}
		s.setProcess(proc)
		s.started(proc)
		select {
		case <-s.ctx.Done():
			s.mu.Lock()
			grace := s.grace
			s.mu.Unlock()
			proc.stop(grace)
			s.setExited("stopped")
			return
		case <-proc.exited:
		}
		if time.Since(proc.startedAt) >= backoffReset {
			backoff = backoffMin
		}
		s.log.Warn("node ended, restarting", "pid", proc.pid, "how", proc.status, "restart_in", backoff)
		s.setExited("the process " + proc.status)
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		if !s.sleep(backoff) {
			return
		}
		backoff = min(backoff*2, backoffMax)
	}
}

func (s *supervisor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stop ends supervision and the node's process, and waits for both.
func (s *supervisor) stop() { s.stopWithin(stopGrace) }

// stopWithin is stop with the time the process gets between SIGTERM and SIGKILL.
func (s *supervisor) stopWithin(grace time.Duration) {
	s.mu.Lock()
	s.grace = grace
	s.mu.Unlock()
	s.cancel()
	<-s.done
}

func (s *supervisor) setProcess(p *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc, s.healthy, s.passed = p, s.plan.Health == nil, s.plan.Health == nil
	s.lastErr = ""
}

func (s *supervisor) setExited(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc, s.healthy, s.passed, s.lastErr = nil, false, false, why
}

func (s *supervisor) snapshot() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := snapshot{healthy: s.healthy, lastErr: s.lastErr, restarts: s.restarts}
	if s.proc != nil {
		sn.pid, sn.running, sn.startedAt = s.proc.pid, true, s.proc.startedAt
		sn.starting = !s.passed && s.plan.Health != nil &&
			time.Since(s.proc.startedAt) < time.Duration(s.plan.Health.StartSeconds)*time.Second
	}
	return sn
}

// healthLoop checks the node: often until a check of the current process passes, then
// every interval.
func (s *supervisor) healthLoop() {
	h := s.plan.Health
	if h == nil {
		return
	}
	interval := time.Duration(h.IntervalSeconds) * time.Second
	for {
		s.mu.Lock()
		proc, passed := s.proc, s.passed
		s.mu.Unlock()
		wait := interval
		if !passed {
			wait = startingCheck
		}
		if proc != nil {
			err := s.check()
			s.mu.Lock()
			if s.proc == proc {
				s.healthy = err == nil
				if err == nil {
					s.passed = true
					s.lastErr = ""
				} else {
					s.lastErr = "health check: " + err.Error()
				}
			}
			s.mu.Unlock()
		}
		if !s.sleep(wait) {
			return
		}
	}
}

// check runs the health check once: an HTTP GET expecting 2xx or 3xx, or a TCP connect.
func (s *supervisor) check() error {
	h := s.plan.Health
	timeout := time.Duration(h.TimeoutSeconds) * time.Second
	addr := net.JoinHostPort(loopback, strconv.Itoa(s.plan.Ports[h.Port]))
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	if h.HTTPPath == "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("connecting to port %s (%s): %w", h.Port, addr, err)
		}
		return c.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+h.HTTPPath, nil)
	if err != nil {
		return err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s on port %s: %w", h.HTTPPath, h.Port, err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s on port %s answered %s", h.HTTPPath, h.Port, resp.Status)
	}
	return nil
}

var healthClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
}

func (s *supervisor) rotateLoop() {
	for s.sleep(rotateEvery) {
		for _, name := range []string{"stdout.log", "stderr.log"} {
			path := filepath.Join(s.workdir, "logs", name)
			if rotated, err := rotateIfLarge(path, s.logMax, s.logKeep); err != nil {
				s.log.Error("log rotation failed", "error", err)
			} else if rotated {
				s.log.Debug("log rotated", "file", path)
			}
		}
	}
}

// crashLoop is how many times a node may end while it starts before waitReady gives up
// on it without waiting out its start time: a binary that exits at once fails in
// seconds, not minutes.
const crashLoop = 3

// waitReady waits until the node is healthy, its start time runs out, or it ended
// crashLoop times on the way.
func (s *supervisor) waitReady(ctx context.Context) bool {
	first := s.snapshot().restarts
	limit := time.Duration(defaultHealthStart) * time.Second
	if s.plan.Health != nil {
		limit = time.Duration(s.plan.Health.StartSeconds) * time.Second
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		sn := s.snapshot()
		if sn.running && sn.healthy {
			return true
		}
		if sn.restarts-first >= crashLoop {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}
