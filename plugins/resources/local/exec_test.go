package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// output collects what a command writes, by stream.
type output struct {
	mu      sync.Mutex
	streams map[string]*strings.Builder
	// line, if set, gets the first line of stdout once.
	line chan string
}

func newOutput() *output {
	return &output{streams: map[string]*strings.Builder{"stdout": {}, "stderr": {}}, line: make(chan string, 1)}
}

func (o *output) add(x resource.ExecOutput) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streams[x.Stream].Write(x.Data)
	if s := o.streams["stdout"].String(); strings.Contains(s, "\n") && o.line != nil {
		o.line <- strings.SplitN(s, "\n", 2)[0]
		o.line = nil
	}
	return nil
}

func (o *output) text(stream string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[stream].String()
}

func (b *bundle) exec(ctx context.Context, tenant string, req resource.ExecRequest, out *output) (resource.ExecResult, error) {
	req.Tenant, req.Instance, req.Type = tenant, "web", contract.Instance
	return b.rc.Exec(ctx, req, out.add)
}

// gone reports whether pid has ended; a zombie waiting for its new parent to reap it
// has ended.
func gone(pid int) bool {
	state, _, err := procStat(pid)
	return err != nil || state == 'Z' || state == 'X'
}

func TestExecRunsInTheNodesWorkingDirWithItsEnvironmentAndFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	res := b.provision(t, "execenv", nodeSpec(nil))
	out := newOutput()
	r, err := b.exec(context.Background(), "execenv", resource.ExecRequest{
		Binary: "sh",
		Args: []string{"-c", `pwd; echo "listen=$LISTEN_ADDR extra=$EXTRA"; test -f "$1" && echo "file ok";
			read -r line; echo "stdin has ${#line} bytes"; echo oops >&2; exit 3`, "sh", "${file:token}"},
		Env:   map[string]string{"EXTRA": "port ${port:http}"},
		Stdin: []byte("a secret on stdin\n"),
	}, out)
	require.NoError(t, err)
	require.Equal(t, 3, r.ExitCode)
	require.False(t, r.TimedOut)
	require.Equal(t, "exited with status 3", r.Status)
	port := strings.Split(res.Addresses["http"], ":")[1]
	require.Equal(t, b.workdir("execenv")+"\nlisten="+res.Addresses["http"]+" extra=port "+port+"\nfile ok\nstdin has 17 bytes\n", out.text("stdout"))
	require.Equal(t, "oops\n", out.text("stderr"))
}

func TestExecRunsTheNodesOwnBinaryAndRefusesAnUnknownOne(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	b.provision(t, "execbin", nodeSpec(nil))
	_, err := b.exec(context.Background(), "execbin", resource.ExecRequest{Binary: "../sh"}, newOutput())
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "request/artifact/binary", sdk.FieldOf(err))

	// The test node's binary with FAIL_START exits 1 at once, naming no secret.
	out := newOutput()
	r, err := b.exec(context.Background(), "execbin", resource.ExecRequest{Env: map[string]string{"TOKEN_FILE": "/nonexistent"}}, out)
	require.NoError(t, err)
	require.Equal(t, 1, r.ExitCode)
	require.Contains(t, out.text("stderr"), "reading TOKEN_FILE")
}

func TestExecInANodeNotProvisionedIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	_, err := b.exec(context.Background(), "nowhere", resource.ExecRequest{Binary: "sh", Args: []string{"-c", "true"}}, newOutput())
	require.Equal(t, sdk.CodeNotFound, sdk.CodeOf(err))
}

// startsChild runs a shell that starts a background sleep, prints its pid and sleeps.
var startsChild = resource.ExecRequest{Binary: "sh", Args: []string{"-c", "sleep 300 & echo $!; sleep 300"}}

func TestExecTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	b.provision(t, "exectime", nodeSpec(nil))
	req := startsChild
	req.Timeout = time.Second
	out := newOutput()
	start := time.Now()
	r, err := b.exec(context.Background(), "exectime", req, out)
	require.NoError(t, err)
	require.True(t, r.TimedOut)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Contains(t, r.Status, "timed out after 1s")
	child, err := strconv.Atoi(strings.TrimSpace(out.text("stdout")))
	require.NoError(t, err)
	eventually(t, 5*time.Second, "the command's child is gone", func() bool { return gone(child) })
}

func TestExecCancelKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	b.provision(t, "execstop", nodeSpec(nil))
	ctx, cancel := context.WithCancel(context.Background())
	out := newOutput()
	line := out.line
	done := make(chan error, 1)
	go func() {
		_, err := b.exec(ctx, "execstop", startsChild, out)
		done <- err
	}()
	var child int
	select {
	case l := <-line:
		var err error
		child, err = strconv.Atoi(l)
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the command printed no pid")
	}
	require.False(t, gone(child))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	eventually(t, 10*time.Second, "the command's child is gone", func() bool { return gone(child) })
}

func TestExecOnATerminalReadsAPasswordWithoutEchoingIt(t *testing.T) {
	t.Parallel()
	b := setup(t, t.TempDir(), "")
	b.provision(t, "exectty", nodeSpec(nil))
	out := newOutput()
	r, err := b.exec(context.Background(), "exectty", resource.ExecRequest{
		Binary: "sh",
		Args:   []string{"-c", `[ -t 0 ] && echo "on a terminal"; read -r u; read -r p; echo "user=$u password has ${#p} bytes"`},
		Stdin:  []byte("alice\ncorrect-horse-battery\n"),
		TTY:    true,
	}, out)
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, out.text("stdout"))
	require.Equal(t, "on a terminal\nuser=alice password has 21 bytes\n", out.text("stdout"))
	require.NotContains(t, out.text("stdout"), "correct-horse")
}
