package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/sdk"
)

// The managed Caddy lives in <data dir>/caddy:
//
//	admin.sock      the admin API, the only way in; no TCP port
//	bootstrap.json  the config Caddy starts with: only the admin socket, 0600
//	caddy.pid       the running Caddy's process id, to end a leftover one at start
//	caddy.log       Caddy's own log (stderr at start, then its default logger)
//	config/, data/  XDG_CONFIG_HOME and XDG_DATA_HOME of Caddy (it keeps no certificate of
//	                its own; the plugin's records are the state)
const (
	managedDirName = "caddy"
	socketName     = "admin.sock"
	pidFileName    = "caddy.pid"
	logFileName    = "caddy.log"
	readyTimeout   = 30 * time.Second
	stopTimeout    = 10 * time.Second
	minBackoff     = 250 * time.Millisecond
	maxBackoff     = 30 * time.Second
	// stableRun is how long a Caddy must have run for the backoff to start again small.
	stableRun = time.Minute
)

// managedCaddy is a Caddy process the plugin runs as its child.
type managedCaddy struct {
	dir, binary string
	cmd         *exec.Cmd
	exited      <-chan struct{}
	started     time.Time
}

func (m *managedCaddy) socket() string  { return filepath.Join(m.dir, socketName) }
func (m *managedCaddy) logPath() string { return filepath.Join(m.dir, logFileName) }

// findBinary finds caddy: the setting, else bin/artifacts/caddy beside the plugin
// directory (the plugin is bin/plugins/fedhost-resource-caddy), else PATH.
func findBinary(setting string) (string, error) {
	if setting != "" {
		if !isExecutable(setting) {
			return "", sdk.Invalid("settings/binary", "%s is not an executable file", truncate(setting, 200))
		}
		return setting, nil
	}
	if exe, err := os.Executable(); err == nil {
		candidate := filepath.Join(filepath.Dir(exe), "..", "artifacts", "caddy")
		if isExecutable(candidate) {
			return filepath.Clean(candidate), nil
		}
	}
	if p, err := exec.LookPath("caddy"); err == nil {
		return p, nil
	}
	return "", sdk.Invalid("settings/managed", "the caddy executable is not in bin/artifacts beside the plugin directory nor in PATH: build it with `go build -o bin/artifacts/caddy github.com/caddyserver/caddy/v2/cmd/caddy` (make build does) or set binary")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// prepareManaged makes the managed Caddy's directories; the socket path must fit a Unix
// socket address.
func prepareManaged(dataDir, binary string) (*managedCaddy, error) {
	m := &managedCaddy{dir: filepath.Join(dataDir, managedDirName), binary: binary}
	if len(m.socket()) > maxSocketPath {
		return nil, sdk.Invalid("settings/managed", "the admin socket %s would be longer than a Unix socket path may be (%d bytes): give the plugin a shorter data dir", truncate(m.socket(), 200), maxSocketPath)
	}
	for _, d := range []string{m.dir, filepath.Join(m.dir, "config"), filepath.Join(m.dir, "data")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("preparing the managed Caddy directory: %w", err)
		}
	}
	return m, nil
}

// start ends a Caddy left by a previous plugin process, starts a new one and waits for
// its admin socket to answer.
func (m *managedCaddy) start(ctx context.Context) error {
	m.killLeftover()
	if err := os.Remove(m.socket()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the old admin socket: %w", err)
	}
	bootstrap := filepath.Join(m.dir, "bootstrap.json")
	b, _ := json.Marshal(object{"admin": adminConfig(m.socket())})
	if err := writeFile(bootstrap, b); err != nil {
		return err
	}
	logFile, err := os.OpenFile(m.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the Caddy log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(m.binary, "run", "--config", bootstrap)
	cmd.Env = append(os.Environ(),
		"XDG_CONFIG_HOME="+filepath.Join(m.dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(m.dir, "data"),
	)
	cmd.Dir = m.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	exited, err := child.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", m.binary, err)
	}
	m.cmd, m.exited, m.started = cmd, exited, time.Now()
	if err := writeFile(filepath.Join(m.dir, pidFileName), []byte(strconv.Itoa(cmd.Process.Pid)+"\n")); err != nil {
		m.stop()
		return err
	}
	if err := m.waitReady(ctx); err != nil {
		m.stop()
		return fmt.Errorf("%w\nlast lines of %s:\n%s", err, m.logPath(), child.Tail(m.logPath(), 20))
	}
	hclog.Default().Info("managed caddy started", "dir", m.dir, "pid", cmd.Process.Pid)
	return nil
}

func (m *managedCaddy) waitReady(ctx context.Context) error {
	a := newAdmin(m.socket())
	deadline := time.Now().Add(readyTimeout)
	for {
		var v json.RawMessage
		if err := a.do(ctx, "GET", "/config/", nil, &v); err == nil {
			return nil
		}
		switch {
		case !m.running():
			return fmt.Errorf("the managed Caddy in %s exited during startup", m.dir)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("the managed Caddy in %s does not answer on its admin socket after %v", m.dir, readyTimeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// killLeftover ends the Caddy of the pid file when that process is still a caddy run of
// this directory (a plugin killed with SIGKILL whose Pdeathsig did not reach it).
func (m *managedCaddy) killLeftover() {
	pidPath := filepath.Join(m.dir, pidFileName)
	b, err := os.ReadFile(pidPath)
	if err != nil {
		return
	}
	defer os.Remove(pidPath)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !strings.Contains(string(cmdline), filepath.Join(m.dir, "bootstrap.json")) {
		return
	}
	hclog.Default().Warn("ending the Caddy left by a previous plugin process", "pid", pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *managedCaddy) running() bool {
	if m.exited == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// stop asks Caddy to end (SIGTERM), then kills it if it does not in time.
func (m *managedCaddy) stop() {
	if !m.running() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(stopTimeout):
		hclog.Default().Warn("the managed Caddy did not stop in time: killing it", "pid", m.cmd.Process.Pid)
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	_ = os.Remove(filepath.Join(m.dir, pidFileName))
	hclog.Default().Info("managed caddy stopped", "dir", m.dir)
}

// supervisor restarts the managed Caddy when it exits, with a backoff that doubles up to
// maxBackoff and starts small again after a run of stableRun, and gives it every route
// again through restore.
type supervisor struct {
	m       *managedCaddy
	restore func(context.Context) error
	// lock is held while Caddy is restarted and given its routes, so that no change
	// goes to a Caddy half set up.
	lock     sync.Locker
	done     chan struct{}
	finished chan struct{}
	stopOnce sync.Once
}

func supervise(m *managedCaddy, lock sync.Locker, restore func(context.Context) error) *supervisor {
	s := &supervisor{m: m, restore: restore, lock: lock, done: make(chan struct{}), finished: make(chan struct{})}
	go s.run()
	return s
}

func (s *supervisor) run() {
	defer close(s.finished)
	backoff := minBackoff
	for {
		select {
		case <-s.done:
			return
		case <-s.m.exited:
		}
		if time.Since(s.m.started) > stableRun {
			backoff = minBackoff
		}
		code := -1
		if s.m.cmd.ProcessState != nil {
			code = s.m.cmd.ProcessState.ExitCode()
		}
		hclog.Default().Warn("the managed caddy exited: restarting it", "exit_code", code, "after", backoff.String(), "log", s.m.logPath())
		select {
		case <-s.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
		s.lock.Lock()
		select {
		case <-s.done:
			s.lock.Unlock()
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout+30*time.Second)
		err := s.m.start(ctx)
		if err == nil {
			err = s.restore(ctx)
		}
		cancel()
		s.lock.Unlock()
		if err != nil {
			hclog.Default().Error("restarting the managed caddy failed", "error", err)
			// exited is closed when start failed or Caddy died again: the loop waits
			// the next backoff. When Caddy runs but took no routes, end it and retry.
			s.m.stop()
		}
	}
}

// stop ends supervision and then Caddy; it waits for a restart under way to finish.
func (s *supervisor) stop() {
	s.stopOnce.Do(func() {
		close(s.done)
		<-s.finished
		s.m.stop()
	})
}
