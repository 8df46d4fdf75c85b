package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fedhost/fedhost/internal/incustest"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
	"github.com/stretchr/testify/require"
)

// execTable puts in the test server the commands the exec tests run: /bin/sh only as the
// driver's stdin runner, greet (its args, env and stdin; status 3) and sleep (until cancelled).
func execTable(s *incustest.Server) {
	s.SetCommand("/bin/sh", func(c incustest.ExecCall) (string, string, int) {
		if len(c.Args) < 6 || c.Args[1] != "-c" || c.Args[2] != stdinRunner {
			return "", "incustest: /bin/sh runs the stdin runner only\n", 2
		}
		in, ok := c.ReadFile(c.Args[4])
		if !ok {
			return "", "sh: cannot open the stdin file\n", 126
		}
		c.Stdin = in
		return c.Run(c.Args[5:])
	})
	s.SetCommand("greet", func(c incustest.ExecCall) (string, string, int) {
		return fmt.Sprintf("args=%s extra=%s stdin=%s", strings.Join(c.Args[1:], ","), c.Env["FEDHOST_KIT"], c.Stdin), "oops\n", 3
	})
	s.SetCommand("sleep", func(c incustest.ExecCall) (string, string, int) {
		select {
		case <-c.Stop:
		case <-time.After(5 * time.Minute):
		}
		return "", "", 0
	})
}

func countPrefix(reqs []string, prefix string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func TestExec(t *testing.T) {
	execTable(srv)
	rc := start(t, settingsJSON(nil))
	ctx := context.Background()
	req := resource.Request{Tenant: "t1", Instance: "exec", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	_, err := rc.Provision(ctx, req)
	require.NoError(t, err)
	t.Cleanup(func() {
		rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: "t1", Instance: "exec", Type: contract.Instance, Spec: req.Spec})
	})
	name := instanceName("t1", "exec")
	run := func(r resource.ExecRequest) (resource.ExecResult, map[string]string, error) {
		r.Tenant, r.Instance, r.Type = "t1", "exec", contract.Instance
		out := map[string]string{}
		res, err := rc.Exec(ctx, r, func(o resource.ExecOutput) error { out[o.Stream] += string(o.Data); return nil })
		return res, out, err
	}

	before := len(srv.Requests())
	res, out, err := run(resource.ExecRequest{Binary: "greet", Args: []string{"a", "b c"}, Env: map[string]string{"FEDHOST_KIT": "kit value"}, Stdin: []byte("s3cret-input")})
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode, res.Status)
	require.Equal(t, "args=a,b c extra=kit value stdin=s3cret-input", out["stdout"])
	require.Equal(t, "oops\n", out["stderr"])
	reqs := srv.Requests()[before:]
	require.Equal(t, 1, countPrefix(reqs, "POST /1.0/instances/"+name+"/files"), "stdin is pushed as one file: %v", reqs)
	require.Equal(t, 1, countPrefix(reqs, "POST /1.0/instances/"+name+"/exec"), reqs)
	require.Equal(t, 2, countPrefix(reqs, "DELETE /1.0/instances/"+name+"/logs/exec-output/"), "the recorded output is removed: %v", reqs)
	require.Equal(t, 0, countPrefix(reqs, "DELETE /1.0/operations/"), reqs)
	for _, r := range reqs {
		require.NotContains(t, r, "s3cret-input")
	}

	res, out, err = run(resource.ExecRequest{Binary: "nothere"})
	require.NoError(t, err)
	require.Equal(t, 127, res.ExitCode)
	require.Contains(t, out["stderr"], "not found")

	// A timeout cancels the operation and reports TimedOut; a cancel returns ctx's error.
	before = len(srv.Requests())
	res, _, err = run(resource.ExecRequest{Binary: "sleep", Args: []string{"300"}, Timeout: time.Second})
	require.NoError(t, err)
	require.True(t, res.TimedOut, res.Status)
	require.Equal(t, 1, countPrefix(srv.Requests()[before:], "DELETE /1.0/operations/"))

	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	before = len(srv.Requests())
	_, err = rc.Exec(cctx, resource.ExecRequest{Tenant: "t1", Instance: "exec", Type: contract.Instance, Binary: "sleep"}, func(resource.ExecOutput) error { return nil })
	require.Error(t, err)
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 1, countPrefix(srv.Requests()[before:], "DELETE /1.0/operations/"), "a cancelled command's operation is cancelled")

	_, _, err = run(resource.ExecRequest{Binary: "greet", TTY: true})
	require.Error(t, err, "a terminal is refused")
	_, err = rc.Exec(ctx, resource.ExecRequest{Tenant: "t1", Instance: "gone", Type: contract.Instance, Binary: "greet"}, func(resource.ExecOutput) error { return nil })
	require.ErrorContains(t, err, "provision it first")
}
