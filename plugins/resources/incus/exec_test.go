package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
	"github.com/stretchr/testify/require"
)

func countPrefix(reqs []string, prefix string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

// gone reports whether a process of this machine has ended (no longer there, or a
// zombie): the test server runs the commands here.
func gone(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	s = s[strings.LastIndexByte(s, ')')+2:]
	return strings.HasPrefix(s, "Z")
}

func waitGone(t *testing.T, pids ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for _, pid := range pids {
		_, err := strconv.Atoi(pid)
		require.NoError(t, err, "not a pid: %q", pid)
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %s still runs after Exec returned", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// output collects a command's output as it comes, with the time of its first byte.
type output struct {
	mu       sync.Mutex
	start    time.Time
	first    time.Duration
	streams  map[string]*strings.Builder
	maxChunk int
	lines    chan string
}

func newOutput() *output {
	return &output{start: time.Now(), streams: map[string]*strings.Builder{"stdout": {}, "stderr": {}}, lines: make(chan string, 100)}
}

func (o *output) add(x resource.ExecOutput) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.first == 0 {
		o.first = time.Since(o.start)
	}
	o.maxChunk = max(o.maxChunk, len(x.Data))
	b, ok := o.streams[x.Stream]
	if !ok {
		return fmt.Errorf("stream %q", x.Stream)
	}
	b.Write(x.Data)
	if x.Stream == "stdout" {
		for _, l := range strings.SplitAfter(string(x.Data), "\n") {
			if strings.HasSuffix(l, "\n") {
				select {
				case o.lines <- strings.TrimSpace(l):
				default:
				}
			}
		}
	}
	return nil
}

func (o *output) text(stream string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[stream].String()
}

func TestExec(t *testing.T) {
	rc := start(t, settingsJSON(nil))
	ctx := context.Background()
	req := resource.Request{Tenant: "t1", Instance: "exec", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	res0, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	addr, err := addressOf(res0.Data)
	require.NoError(t, err)
	t.Cleanup(func() {
		rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "t1", Instance: "exec", Type: contract.Instance, Spec: req.Spec})
	})
	name := instanceName("t1", "exec")
	sh := func(script string) resource.ExecRequest {
		return resource.ExecRequest{Tenant: "t1", Instance: "exec", Type: contract.Instance, Spec: req.Spec, Binary: "sh", Args: []string{"-c", script, "sh"}}
	}
	run := func(r resource.ExecRequest) (resource.ExecResult, *output, error) {
		out := newOutput()
		res, err := rc.Exec(ctx, r, out.add)
		return res, out, err
	}

	t.Run("streams_env_stdin_status", func(t *testing.T) {
		t.Setenv("FEDHOST_NOT_IN_THE_INSTANCE", "leak")
		before := len(srv.Requests())
		r := sh(`echo "args=$1,$2 data=$DATA_DIR extra=$FEDHOST_KIT port=$PORT home=$HOME leak=$FEDHOST_NOT_IN_THE_INSTANCE"; read -r line; echo "stdin=$line"; pwd >&2; echo oops >&2; exit 3`)
		r.Args = append(r.Args, "a", "${port:http}")
		r.Env = map[string]string{"FEDHOST_KIT": "kit value", "PORT": "${port:http}"}
		r.Stdin = []byte("s3cret-input\n")
		res, out, err := run(r)
		require.NoError(t, err)
		require.Equal(t, 3, res.ExitCode, res.Status)
		_, port, _ := strings.Cut(addr, ":")
		require.Equal(t, fmt.Sprintf("args=a,%s data=/var/lib/node extra=kit value port=%s home=/root leak=\nstdin=s3cret-input\n", port, port), out.text("stdout"))
		require.Equal(t, "oops\n", strings.SplitN(out.text("stderr"), "\n", 2)[1])
		require.True(t, strings.HasSuffix(strings.SplitN(out.text("stderr"), "\n", 2)[0], filepath.Join("instances", name, "srv", "fedhost")), "the command runs in the instance's node_dir: %q", out.text("stderr"))
		reqs := srv.Requests()[before:]
		require.Equal(t, 1, countPrefix(reqs, "POST /1.0/instances/"+name+"/exec"), reqs)
		ws := 0
		for _, r := range reqs {
			if strings.HasPrefix(r, "GET /1.0/operations/") && strings.HasSuffix(r, "/websocket") {
				ws++
			}
		}
		require.Equal(t, 4, ws, "control, stdin, stdout and stderr websockets: %v", reqs)
		require.Equal(t, 0, countPrefix(reqs, "POST /1.0/instances/"+name+"/files"), "stdin goes over its websocket: %v", reqs)
		require.Equal(t, 0, countPrefix(reqs, "DELETE /1.0/operations/"), reqs)
		for _, r := range reqs {
			require.NotContains(t, r, "s3cret-input")
		}
	})

	t.Run("output_while_it_runs", func(t *testing.T) {
		start := time.Now()
		res, out, err := run(sh(`echo first; sleep 1.5; echo second`))
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode)
		require.Equal(t, "first\nsecond\n", out.text("stdout"))
		require.Less(t, out.first, time.Second, "the first line came only at the end")
		require.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond)
	})

	t.Run("large_output_and_stdin", func(t *testing.T) {
		res, out, err := run(sh(`head -c 1048576 /dev/zero | tr '\0' x`))
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode)
		require.Equal(t, strings.Repeat("x", 1<<20), out.text("stdout"))
		require.LessOrEqual(t, out.maxChunk, execChunk)

		r := sh(`wc -c`)
		r.Stdin = []byte(strings.Repeat("y", 300<<10))
		res, out, err = run(r)
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode)
		require.Equal(t, strconv.Itoa(300<<10), strings.TrimSpace(out.text("stdout")))

		res, out, err = run(sh(`cat`)) // no stdin: closed at once
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode)
		require.Empty(t, out.text("stdout"))
	})

	t.Run("not_found", func(t *testing.T) {
		res, out, err := run(resource.ExecRequest{Tenant: "t1", Instance: "exec", Type: contract.Instance, Binary: "fedhost-nothere"})
		require.NoError(t, err)
		require.Equal(t, 127, res.ExitCode, res.Status)
		require.Contains(t, res.Status, "Command not found")
		require.Contains(t, out.text("stderr"), "fedhost-nothere")
	})

	t.Run("left_running_is_killed", func(t *testing.T) {
		res, out, err := run(sh(`sleep 300 & echo $!; exit 0`))
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode)
		waitGone(t, strings.TrimSpace(out.text("stdout")))
	})

	// A timeout of a command that ignores SIGTERM: the wrapper kills its group.
	t.Run("timeout_ignoring_sigterm", func(t *testing.T) {
		before := len(srv.Requests())
		r := sh(`trap "" TERM; sleep 300 & echo "$$ $!"; wait; wait`)
		r.Timeout = time.Second
		start := time.Now()
		res, out, err := run(r)
		require.NoError(t, err)
		require.True(t, res.TimedOut, res.Status)
		require.Equal(t, -1, res.ExitCode)
		require.Less(t, time.Since(start), r.Timeout+execGrace, "the group was not killed by the wrapper: %s", res.Status)
		waitGone(t, strings.Fields(out.text("stdout"))...)
		require.Equal(t, 0, countPrefix(srv.Requests()[before:], "DELETE /1.0/operations/"), "the signals end it; no DELETE is needed")
	})

	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		out := newOutput()
		done := make(chan error, 1)
		go func() {
			_, err := rc.Exec(cctx, sh(`sleep 300 & echo "$$ $!"; wait`), out.add)
			done <- err
		}()
		var pids string
		select {
		case pids = <-out.lines:
		case <-time.After(10 * time.Second):
			t.Fatal("no output while the command runs")
		}
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(execGrace + execKillWait + 5*time.Second):
			t.Fatal("a cancelled Exec did not return")
		}
		require.Less(t, time.Since(start), 2*time.Second, "SIGTERM ends a command that does not ignore it at once")
		waitGone(t, strings.Fields(pids)...)
	})

	t.Run("refused", func(t *testing.T) {
		_, _, err := run(resource.ExecRequest{Tenant: "t1", Instance: "exec", Type: contract.Instance, Binary: "sh", TTY: true})
		require.Error(t, err, "a terminal is refused")
		_, _, err = run(resource.ExecRequest{Tenant: "t1", Instance: "gone", Type: contract.Instance, Binary: "sh"})
		require.ErrorContains(t, err, "provision it first")
		_, _, err = run(sh(`echo ${secret:token}`))
		require.Error(t, err, "a secret placeholder in args is refused")
	})
}
