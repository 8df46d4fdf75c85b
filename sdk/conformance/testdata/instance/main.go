// Command instance is the instance provider the tests of the kit's exec checks run
// against: it keeps each node's environment in memory and runs commands as processes of
// this machine in a session of their own. Built with -X main.variant=leaves-process, a
// cancel returns at once and leaves the command running, which the kit must catch (Deprovision kills it);
// with slow-stop, a cancelled command takes 3 s to go, which the host must wait for.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

var variant = "sound"

type provider struct {
	mu    sync.Mutex
	nodes map[string]map[string]string // tenant/instance -> env
	pgids []int                        // of every command started, killed by Deprovision
}

func (p *provider) Provision(_ context.Context, req resource.Request) (resource.Result, error) {
	var spec contract.InstanceRequest
	if err := json.Unmarshal(req.Spec, &spec); err != nil {
		return resource.Result{}, sdk.Invalid("request", "not an instance request")
	}
	p.mu.Lock()
	p.nodes[req.Tenant+"/"+req.Instance] = spec.Env
	p.mu.Unlock()
	data, _ := json.Marshal(contract.InstanceResult{State: "running", Addresses: map[string]string{}})
	return resource.Result{Data: data}, nil
}

func (p *provider) Deprovision(_ context.Context, req resource.DeprovisionRequest) error {
	p.mu.Lock()
	delete(p.nodes, req.Tenant+"/"+req.Instance)
	for _, pg := range p.pgids {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	}
	p.mu.Unlock()
	return nil
}

func (p *provider) Exec(ctx context.Context, req resource.ExecRequest, output func(resource.ExecOutput) error) (resource.ExecResult, error) {
	p.mu.Lock()
	nodeEnv, ok := p.nodes[req.Tenant+"/"+req.Instance]
	p.mu.Unlock()
	if !ok {
		return resource.ExecResult{}, sdk.Errorf(sdk.CodeNotFound, "no such node")
	}
	if req.Binary != "sh" {
		return resource.ExecResult{}, sdk.Invalid("binary", "only sh runs here")
	}
	env := []string{"PATH=/usr/bin:/bin"}
	for _, m := range []map[string]string{nodeEnv, req.Env} {
		for k, v := range m {
			env = append(env, k+"="+v)
		}
	}
	sort.Strings(env)
	cmd := exec.Command("/bin/sh", req.Args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(req.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var mu sync.Mutex
	var readers sync.WaitGroup
	for _, stream := range []string{"stdout", "stderr"} {
		r, w, err := os.Pipe()
		if err != nil {
			return resource.ExecResult{}, err
		}
		defer r.Close()
		defer w.Close()
		if stream == "stdout" {
			cmd.Stdout = w
		} else {
			cmd.Stderr = w
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			buf := make([]byte, 4096)
			for {
				k, err := r.Read(buf)
				if k > 0 {
					mu.Lock()
					_ = output(resource.ExecOutput{Stream: stream, Data: bytes.Clone(buf[:k])})
					mu.Unlock()
				}
				if err != nil {
					return
				}
			}
		}()
	}
	if err := cmd.Start(); err != nil {
		return resource.ExecResult{}, err
	}
	p.mu.Lock()
	p.pgids = append(p.pgids, cmd.Process.Pid)
	p.mu.Unlock()
	cmd.Stdout.(*os.File).Close()
	cmd.Stderr.(*os.File).Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		timeout = time.After(req.Timeout)
	}
	kill := func() error { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); return <-exited }
	var err error
	timedOut := false
	select {
	case err = <-exited:
	case <-timeout:
		timedOut, err = true, kill()
	case <-ctx.Done():
		if variant == "leaves-process" {
			return resource.ExecResult{}, ctx.Err()
		}
		if variant == "slow-stop" {
			time.Sleep(3 * time.Second) // as a command that takes its time over SIGTERM
		}
		kill()
		readers.Wait()
		return resource.ExecResult{}, ctx.Err()
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	readers.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return resource.ExecResult{ExitCode: code, TimedOut: timedOut, Status: "ended"}, nil
}

func main() {
	resource.Serve(sdk.Description{Name: "instance-test", Version: "0.1.0", Summary: "The kit's test instance provider",
		Serves: []string{contract.Instance}}, &provider{nodes: map[string]map[string]string{}})
}
