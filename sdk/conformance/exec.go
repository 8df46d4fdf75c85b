package conformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// ExecCase says how the kit runs commands in a node of an instance provider that
// implements resource.Executor.
type ExecCase struct {
	// Shell is the name of an artifact the provider runs as ExecRequest.Binary: a POSIX
	// sh with kill, sleep and a /proc of the node's machine.
	Shell string
	// EnvName is a variable the case's Request sets in the node's environment, and
	// EnvValue its value as the node's process has it (placeholders expanded).
	EnvName, EnvValue string
}

// execStopBound is how long the kit waits for Exec to return after its cancel or its
// timeout before it calls the provider broken: a bound on a hang, not a speed goal.
const execStopBound = 30 * time.Second

// collected is the output of one command, by stream, and the first line of stdout once
// it has come.
type collected struct {
	mu        sync.Mutex
	stdout    strings.Builder
	stderr    strings.Builder
	firstLine chan string // never reassigned: read without the lock
	lineSent  bool
}

func newCollected() *collected { return &collected{firstLine: make(chan string, 1)} }

func (c *collected) add(x resource.ExecOutput) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch x.Stream {
	case "stdout":
		c.stdout.Write(x.Data)
		if s := c.stdout.String(); !c.lineSent && strings.Contains(s, "\n") {
			c.firstLine <- strings.SplitN(s, "\n", 2)[0]
			c.lineSent = true
		}
	case "stderr":
		c.stderr.Write(x.Data)
	default:
		return fmt.Errorf("output on stream %q, want stdout or stderr", x.Stream)
	}
	return nil
}

func (c *collected) text() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout.String(), c.stderr.String()
}

// checkExec runs the exec checks on the node p: a command's output by stream, its exit
// status, the node's environment and the request's, stdin; output that comes while the
// command runs; a cancel and a timeout that kill the command and what it started.
func checkExec(t testing.TB, ctx context.Context, x resource.Executor, typ string, p Provisioned, c ExecCase) {
	t.Helper()
	req := func(script string) resource.ExecRequest {
		return resource.ExecRequest{Tenant: p.Tenant, Instance: p.Instance, Type: typ, Binary: c.Shell, Args: []string{"-c", script, "sh"}}
	}

	r := req(fmt.Sprintf(`echo "env=$%s extra=$FEDHOST_KIT"; read -r line; echo "stdin=$line"; echo oops >&2; exit 3`, c.EnvName))
	r.Env = map[string]string{"FEDHOST_KIT": "kit value"}
	r.Stdin = []byte("from the kit\n")
	out := newCollected()
	res, err := x.Exec(ctx, r, out.add)
	stdout, stderr := out.text()
	switch {
	case err != nil:
		t.Errorf("exec: a command that exits with status 3 gave an error, want its exit status: %v", err)
	case res.ExitCode != 3 || res.TimedOut:
		t.Errorf("exec: a command that exits with status 3 gave exit code %d (timed out %v, %q)", res.ExitCode, res.TimedOut, res.Status)
	}
	if want := fmt.Sprintf("env=%s extra=kit value\nstdin=from the kit\n", c.EnvValue); stdout != want {
		t.Errorf("exec: stdout is %q, want %q (the node's %s, the request's env and its stdin)", stdout, want, c.EnvName)
	}
	if stderr != "oops\n" {
		t.Errorf("exec: stderr is %q, want %q", stderr, "oops\n")
	}

	res, err = x.Exec(ctx, req(`exit 0`), newCollected().add)
	if err != nil || res.ExitCode != 0 {
		t.Errorf("exec: a command that exits with status 0 gave exit code %d and %v", res.ExitCode, err)
	}

	// A cancelled command: its first line comes while it runs; the cancel ends it and
	// the process it started.
	checkStop(t, ctx, x, req, false)
	checkStop(t, ctx, x, req, true)
}

// checkStop starts a command that starts a sleep, prints both pids and waits, ends it by
// cancel or by timeout, and checks that Exec returns and that both processes are gone.
func checkStop(t testing.TB, ctx context.Context, x resource.Executor, req func(string) resource.ExecRequest, byTimeout bool) {
	t.Helper()
	how := "cancel"
	if byTimeout {
		how = "timeout"
	}
	r := req(`sleep 300 & echo "$$ $!"; wait`)
	if byTimeout {
		r.Timeout = 2 * time.Second
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := newCollected()
	type ended struct {
		res resource.ExecResult
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := x.Exec(cctx, r, out.add)
		done <- ended{res, err}
	}()
	var pids string
	select {
	case pids = <-out.firstLine:
	case e := <-done:
		t.Fatalf("exec (%s): the command ended before its first line came (%q, %v); want its output while it runs", how, e.res.Status, e.err)
	case <-time.After(execStopBound):
		t.Fatalf("exec (%s): no line of output %s after start: output must come while the command runs", how, execStopBound)
	}
	if !byTimeout {
		cancel()
	}
	select {
	case e := <-done:
		if byTimeout {
			if e.err != nil || !e.res.TimedOut {
				t.Errorf("exec (timeout): a command past its timeout gave %+v and %v, want TimedOut and no error", e.res, e.err)
			}
		} else if e.err == nil {
			t.Errorf("exec (cancel): a cancelled command returned no error (%+v), want the context's", e.res)
		}
	case <-time.After(execStopBound + r.Timeout):
		t.Fatalf("exec (%s): Exec had not returned %s after the command's %s", how, execStopBound, how)
	}
	for _, pid := range strings.Fields(pids) {
		if strings.Trim(pid, "0123456789") != "" {
			t.Fatalf("exec (%s): the command printed %q, want two pids", how, pids)
		}
	}
	// Both are gone once Exec returned; a zombie (ended, its parent not yet told) is gone
	// too. A short wait lets the machine's init reap what was reparented to it.
	check := req(fmt.Sprintf(`for i in 1 2 3 4 5 6 7 8 9 10; do left=; for p in %s; do s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null) && [ "$s" != Z ] && left="$left $p"; done; [ -z "$left" ] && exit 0; sleep 0.2; done; echo "left:$left"`, pids))
	cout := newCollected()
	res, err := x.Exec(ctx, check, cout.add)
	stdout, stderr := cout.text()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec (%s): checking the processes gave %d %v: %s", how, res.ExitCode, err, stderr)
	}
	if strings.Contains(stdout, "left:") {
		t.Errorf("exec (%s): processes %s of the command (started as %s) are still running after Exec returned", how, strings.TrimSpace(strings.TrimPrefix(stdout, "left:")), pids)
	}
}

// runsCommands reports whether the provider behind x implements the exec call: asked to
// run a command in a node it does not have, one without the call answers unimplemented.
func runsCommands(ctx context.Context, x resource.Executor, typ, tenant string) bool {
	_, err := x.Exec(ctx, resource.ExecRequest{Tenant: tenant, Instance: "kit-exec-probe", Type: typ, Args: []string{"-c", "exit 0"}},
		func(resource.ExecOutput) error { return nil })
	return sdk.CodeOf(err) != sdk.CodeUnsupported
}
