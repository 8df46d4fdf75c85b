package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one started or adopted node process. Exited is closed when it is gone.
type process struct {
	pid       int
	startTime uint64 // field 22 of /proc/<pid>/stat: tells a pid's reuse apart
	startedAt time.Time
	exited    chan struct{}
	status    string // how it ended, set before exited is closed
}

// procStat reads the state and start time of pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, startTime uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name may hold spaces and parentheses: the fields start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	startTime, err = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], startTime, err
}

// alive reports whether pid is still the process that started at startTime. A zombie
// counts as gone: an adopted node's new parent may be slow to reap it.
func alive(pid int, startTime uint64) bool {
	state, st, err := procStat(pid)
	return err == nil && st == startTime && state != 'Z' && state != 'X'
}

// startProcess runs the plan in workdir in a session of its own, so that the node
// outlives the plugin, with stdout and stderr appended to the files under logs/.
func startProcess(pl plan, workdir string) (*process, error) {
	logs := filepath.Join(workdir, "logs")
	stdout, err := os.OpenFile(filepath.Join(logs, "stdout.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the node's stdout log: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(logs, "stderr.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the node's stderr log: %w", err)
	}
	defer stderr.Close()

	path, args, err := launchCommand(pl)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Args[0] = pl.Binary
	cmd.Dir = workdir
	cmd.Env = envList(pl.Env)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", pl.Binary, err)
	}
	pid := cmd.Process.Pid
	_, startTime, err := procStat(pid)
	if err != nil {
		// The process is already gone; Wait below reports how it ended.
		startTime = 0
	}
	p := &process{pid: pid, startTime: startTime, startedAt: time.Now(), exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.status = exitStatus(err)
		// Whatever the node left in its process group goes with it.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		close(p.exited)
	}()
	return p, nil
}

// adoptProcess watches a node process that a previous run of the plugin started. It is
// not this process's child, so it cannot be waited for: it is polled.
func adoptProcess(pid int, startTime uint64, startedAt time.Time) *process {
	p := &process{pid: pid, startTime: startTime, startedAt: startedAt, exited: make(chan struct{})}
	go func() {
		for alive(pid, startTime) {
			time.Sleep(250 * time.Millisecond)
		}
		p.status = "exited (adopted process: status unknown)"
		close(p.exited)
	}()
	return p
}

// stop ends the process's whole group: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	if !alive(p.pid, p.startTime) {
		<-p.exited
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		if alive(p.pid, p.startTime) {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		<-p.exited
	}
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	if err != nil {
		return err.Error()
	}
	return "exited with status 0"
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
