package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// execGrace is the SIGTERM-to-SIGKILL time of a command that is cancelled or times out.
const execGrace = 2 * time.Second

// execChunk is the most output one message carries.
const execChunk = 32 << 10

// Exec runs a command in a node's working dir with the node's environment (its plan's,
// so its files and ports are those the node runs with), in a session of its own: a
// timeout or a cancel ends its whole process group, and so does its end, so that nothing
// it started outlives it.
func (p *provider) Exec(ctx context.Context, req resource.ExecRequest, output func(resource.ExecOutput) error) (resource.ExecResult, error) {
	cfg, err := p.settings()
	if err != nil {
		return resource.ExecResult{}, err
	}
	p.mu.Lock()
	n := p.nodes[req.Tenant+"/"+req.Instance]
	p.mu.Unlock()
	var pl plan
	known := false
	if n != nil {
		n.mu.Lock()
		pl, known = n.st.Plan, n.known
		n.mu.Unlock()
	}
	if !known {
		return resource.ExecResult{}, sdk.Errorf(sdk.CodeNotFound, "node %s/%s is not provisioned here: provision it before running a command in it", req.Tenant, req.Instance)
	}
	bin := pl.Binary
	if req.Binary != "" {
		if bin, err = cfg.binaryPath(req.Binary); err != nil {
			return resource.ExecResult{}, err
		}
	}
	files := map[string]contract.InstanceFile{}
	for name := range pl.Files {
		files[name] = contract.InstanceFile{}
	}
	args := make([]string, len(req.Args))
	for i, a := range req.Args {
		if args[i], err = expand(a, fmt.Sprintf("args/%d", i), n.workdir, files, pl.Ports); err != nil {
			return resource.ExecResult{}, err
		}
	}
	env := map[string]string{}
	for k, v := range pl.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		if env[k], err = expand(v, "env/"+k, n.workdir, files, pl.Ports); err != nil {
			return resource.ExecResult{}, err
		}
	}
	path, launchArgs, err := launchCommand(plan{Binary: bin, Args: args, MemoryMB: pl.MemoryMB})
	if err != nil {
		return resource.ExecResult{}, err
	}
	cmd := exec.Command(path, launchArgs...)
	cmd.Args[0] = bin
	cmd.Dir = n.workdir
	cmd.Env = envList(env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}

	out := &execOutput{send: output}
	var readers sync.WaitGroup
	var closeAfterStart []*os.File
	var master *os.File
	if req.TTY {
		m, slave, err := openTerminal()
		if err != nil {
			return resource.ExecResult{}, err
		}
		master = m
		defer master.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, 0
		closeAfterStart = append(closeAfterStart, slave)
		readers.Add(1)
		go func() { defer readers.Done(); out.copy("stdout", master) }()
	} else {
		cmd.Stdin = bytes.NewReader(req.Stdin)
		for _, stream := range []string{"stdout", "stderr"} {
			r, w, err := os.Pipe()
			if err != nil {
				return resource.ExecResult{}, fmt.Errorf("making the command's %s pipe: %w", stream, err)
			}
			defer r.Close()
			if stream == "stdout" {
				cmd.Stdout = w
			} else {
				cmd.Stderr = w
			}
			closeAfterStart = append(closeAfterStart, w)
			readers.Add(1)
			go func() { defer readers.Done(); out.copy(stream, r) }()
		}
	}
	err = cmd.Start()
	for _, f := range closeAfterStart {
		f.Close()
	}
	if err != nil {
		readers.Wait()
		return resource.ExecResult{}, fmt.Errorf("starting %s in node %s/%s: %w", filepath.Base(bin), req.Tenant, req.Instance, err)
	}
	pgid := cmd.Process.Pid
	if req.TTY {
		// The terminal has echo off, so what is written here is not read back.
		go func() { _, _ = master.Write(req.Stdin) }()
	}
	p.log.Info("command started", "node", req.Tenant+"/"+req.Instance, "binary", filepath.Base(bin), "pid", pgid)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var waitErr error
	timedOut, cancelled := false, false
	select {
	case waitErr = <-exited:
	case <-timeout:
		timedOut = true
		waitErr = stopGroup(pgid, exited)
	case <-ctx.Done():
		cancelled = true
		waitErr = stopGroup(pgid, exited)
	}
	// What the command left in its process group goes with it; then its output ends.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if req.TTY {
		// A process that left the group may hold the terminal: the output stops here.
		master.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	}
	readers.Wait()
	res := resource.ExecResult{ExitCode: exitCode(waitErr), TimedOut: timedOut, Status: exitStatus(waitErr)}
	if timedOut {
		res.Status = fmt.Sprintf("timed out after %s and killed (%s)", req.Timeout, res.Status)
	}
	p.log.Info("command ended", "node", req.Tenant+"/"+req.Instance, "pid", pgid, "how", res.Status)
	if out.err != nil {
		return res, out.err
	}
	if cancelled {
		return res, ctx.Err()
	}
	return res, nil
}

// stopGroup ends a process group: SIGTERM, then SIGKILL after execGrace.
func stopGroup(pgid int, exited <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-exited:
		return err
	case <-time.After(execGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-exited
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// execOutput passes a command's output on, one message at a time; after the first
// failure to send (the caller went away) it only drains.
type execOutput struct {
	send func(resource.ExecOutput) error
	mu   sync.Mutex
	err  error
}

func (o *execOutput) copy(stream string, r io.Reader) {
	buf := make([]byte, execChunk)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			o.mu.Lock()
			if o.err == nil {
				o.err = o.send(resource.ExecOutput{Stream: stream, Data: bytes.Clone(buf[:k])})
			}
			o.mu.Unlock()
		}
		if err != nil {
			return // EOF, or EIO from a terminal whose last holder is gone
		}
	}
}

// openTerminal opens a pseudo-terminal with echo and output processing off: a password
// written to it is read by the command and never shows in its output, and the output's
// newlines stay as the command wrote them.
func openTerminal() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a terminal for the command: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		m.Close()
		return nil, nil, fmt.Errorf("opening a terminal for the command: %s: %w", what, err)
	}
	rc, err := m.SyscallConn()
	if err != nil {
		return fail("raw descriptor", err)
	}
	var num int
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) {
		if ioctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioctlErr == nil {
			num, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); err != nil {
		return fail("raw descriptor", err)
	}
	if ioctlErr != nil {
		return fail("unlocking", ioctlErr)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", num), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("opening its other end", err)
	}
	t, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err == nil {
		t.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL
		t.Oflag &^= unix.OPOST
		err = unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, t)
	}
	if err != nil {
		s.Close()
		return fail("turning echo off", err)
	}
	return m, s, nil
}

var _ resource.Executor = (*provider)(nil)
