package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// execOut collects a command's output by stream, and each stdout piece's arrival time.
type execOut struct {
	mu       sync.Mutex
	streams  map[string]*strings.Builder
	arrivals []time.Time
}

func newExecOut() *execOut {
	return &execOut{streams: map[string]*strings.Builder{"stdout": {}, "stderr": {}}}
}

func (o *execOut) add(x resource.ExecOutput) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streams[x.Stream].Write(x.Data)
	if x.Stream == "stdout" {
		o.arrivals = append(o.arrivals, time.Now())
	}
	return nil
}

func (o *execOut) text(stream string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[stream].String()
}

// A command runs on the machine in the node's working dir with its environment and
// files; a secret on stdin is read on a terminal with echo off and is in no output or
// log; what the command leaves in its process group is killed when it ends; its script
// is gone after it.
func TestExecOnTheMachine(t *testing.T) {
	workDir := t.TempDir()
	logs := &syncBuffer{}
	// A bound on a hang only: each SSH session takes seconds on the loaded test machine.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	p, err := client.Start(ctx, pluginBin, client.WithLogger(hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, settingsJSON(workDir, "")))
	rc := p.Resource()
	req := resource.Request{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	res, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	// The node's supervisor runs on until deprovisioned: done before the plugin is killed
	// at the end, or here if the test stops before.
	deprovision := sync.OnceFunc(func() {
		if err := rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: req.Spec}); err != nil {
			t.Errorf("deprovisioning the node: %v", err)
		}
	})
	t.Cleanup(deprovision)
	addr, err := addressOf(res.Data)
	require.NoError(t, err)
	nodeDir := filepath.Join(workDir, "t1", "web")
	run := func(r resource.ExecRequest) (resource.ExecResult, *execOut, error) {
		r.Tenant, r.Instance, r.Type = "t1", "web", contract.Instance
		out := newExecOut()
		res, err := rc.Exec(ctx, r, out.add)
		return res, out, err
	}

	const password = "pw-7f3a9c1e5b2d"
	r, out, err := run(resource.ExecRequest{Binary: "sh", Args: []string{"-c",
		`pwd; echo "listen=$LISTEN_ADDR extra=$EXTRA"; cat "$1"; read -r line; echo "stdin has ${#line} bytes"; echo oops >&2; exit 3`, "sh", "${file:token}"},
		Env: map[string]string{"EXTRA": "port ${port:http}"}, Stdin: []byte(password + "\n")})
	require.NoError(t, err)
	require.Equal(t, 3, r.ExitCode)
	require.Equal(t, "exited with status 3", r.Status)
	port := strings.Split(addr, ":")[1]
	require.Equal(t, nodeDir+"\nlisten="+addr+" extra=port "+port+"\n"+testToken+"\nstdin has 15 bytes\n", out.text("stdout"))
	require.Equal(t, "oops\n", out.text("stderr"))

	// On a terminal with echo off, the password read is not output.
	r, out, err = run(resource.ExecRequest{Binary: "sh", TTY: true, Stdin: []byte(password + "\n"),
		Args: []string{"-c", `test -t 0 && echo "a terminal"; read -r line; echo "read ${#line} bytes"`}})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode)
	require.Equal(t, "a terminal\nread 15 bytes\n", out.text("stdout")+out.text("stderr"))

	// Output comes as it is written, not at the end.
	r, out, err = run(resource.ExecRequest{Binary: "sh", Args: []string{"-c", `echo one; sleep 1; echo two`}})
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", out.text("stdout"))
	require.Len(t, out.arrivals, 2)
	require.Greater(t, out.arrivals[1].Sub(out.arrivals[0]), 500*time.Millisecond)

	// A process the command started in the background goes when the command ends.
	r, out, err = run(resource.ExecRequest{Binary: "sh", Args: []string{"-c", `sleep 300 >/dev/null 2>&1 & echo $!`}})
	require.NoError(t, err)
	left, err := strconv.Atoi(strings.TrimSpace(out.text("stdout")))
	require.NoError(t, err)
	eventually(t, 5*time.Second, "the command's background process ends with it", func() bool { return !groupRunning(t, left, false) })

	// A node that is not provisioned is not found.
	_, err = rc.Exec(ctx, resource.ExecRequest{Tenant: "t1", Instance: "nowhere", Type: contract.Instance, Binary: "sh"}, newExecOut().add)
	require.ErrorContains(t, err, "not provisioned")

	// A node changed by another plugin (another fedhost host) is read again: the command
	// sees its new environment.
	other := start(t, settingsJSON(workDir, ""))
	changed := nodeSpec(func(s *contract.InstanceRequest) { s.Env["FLAVOUR"] = "second" })
	_, err = other.Provision(ctx, resource.Request{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: changed, Secrets: testSecrets})
	require.NoError(t, err)
	_, out, err = run(resource.ExecRequest{Binary: "sh", Args: []string{"-c", `echo "flavour=$FLAVOUR"`}})
	require.NoError(t, err)
	require.Equal(t, "flavour=second\n", out.text("stdout"))

	entries, err := os.ReadDir(filepath.Join(nodeDir, ".fedhost"))
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "exec-"), "left in .fedhost: %s", e.Name())
	}
	deprovision()
	require.NoDirExists(t, nodeDir, "the node goes with its supervisor")
	p.Kill()
	require.NotContains(t, logs.String(), password)
	require.Contains(t, logs.String(), "command ended")
}

// cutProxy forwards TCP connections to addr until cut, which closes every connection open
// at that moment (a broken network path); later connections are forwarded again.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, addr string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A command whose SSH connection breaks does not live on on the machine: the call says
// the connection ended and that the command was stopped, and its process group is gone.
func TestExecConnectionBreaks(t *testing.T) {
	workDir := t.TempDir()
	proxy := newCutProxy(t, sshd.Addr)
	var settings map[string]any
	require.NoError(t, json.Unmarshal(settingsJSON(workDir, ""), &settings))
	settings["machines"].([]any)[0].(map[string]any)["address"] = proxy.ln.Addr().String()
	raw, err := json.Marshal(settings)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rc := start(t, raw)
	req := resource.Request{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	_, err = rc.Provision(ctx, req)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "t1", Instance: "web", Type: contract.Instance, Spec: req.Spec}); err != nil {
			t.Errorf("deprovisioning the node: %v", err)
		}
	})

	pids := make(chan int, 1)
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := rc.Exec(ctx, resource.ExecRequest{Tenant: "t1", Instance: "web", Type: contract.Instance, Binary: "sh",
			Args: []string{"-c", `echo $$; exec sleep 300`}}, func(x resource.ExecOutput) error {
			if x.Stream == "stdout" {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(x.Data))); err == nil {
					once.Do(func() { pids <- pid })
				}
			}
			return nil
		})
		done <- err
	}()
	var pid int
	select {
	case pid = <-pids:
	case err := <-done:
		t.Fatalf("the command ended before its connection was cut: %v", err)
	}
	require.True(t, groupRunning(t, pid, false), "the command runs on the machine")
	proxy.cut()
	err = <-done
	require.ErrorContains(t, err, "the SSH connection ended before the command's exit status came; the command was stopped")
	eventually(t, 10*time.Second, "the command is gone from the machine after its connection broke", func() bool { return !groupRunning(t, pid, false) })
}
