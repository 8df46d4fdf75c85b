package main

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// BenchmarkProvisionNode is a first provision of the test node on the Incus test server
// (volume, instance, files, start, until its health check passes through the proxy
// device) and its deprovision, through the plugin over gRPC; with the server's
// operations ending at once, and after 20 ms each.
func BenchmarkProvisionNode(b *testing.B) {
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		b.Run(fmt.Sprintf("operation=%s", delay), func(b *testing.B) {
			srv.SetOperationDelay(delay)
			b.Cleanup(func() { srv.SetOperationDelay(20 * time.Millisecond) })
			rc := start(b, settingsJSON(nil))
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				req := resource.Request{Tenant: "bench", Instance: fmt.Sprintf("n%d", i), Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
				if _, err := rc.Provision(ctx, req); err != nil {
					b.Fatal(err)
				}
				if err := rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance, Spec: req.Spec}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProvisionUnchanged is a provision of a running node's same spec: one GET of
// the instance and one health check.
func BenchmarkProvisionUnchanged(b *testing.B) {
	rc := start(b, settingsJSON(nil))
	ctx := context.Background()
	req := resource.Request{Tenant: "bench", Instance: "same", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	if _, err := rc.Provision(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance, Spec: req.Spec})
	})
	for b.Loop() {
		if _, err := rc.Provision(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// benchExecNode provisions the node the exec benchmarks run their commands in.
func benchExecNode(b *testing.B) (*resource.Client, resource.ExecRequest) {
	rc := start(b, settingsJSON(nil))
	ctx := context.Background()
	req := resource.Request{Tenant: "bench", Instance: "exec", Type: contract.Instance, Spec: nodeSpec(nil), Secrets: testSecrets}
	if _, err := rc.Provision(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance, Spec: req.Spec})
	})
	return rc, resource.ExecRequest{Tenant: req.Tenant, Instance: req.Instance, Type: contract.Instance, Spec: req.Spec, Binary: "sh"}
}

// execBoth runs script through the driver (the plugin over gRPC, the test server's
// websocket exec, which runs it on this machine) and directly (os/exec of the same sh
// here), and reports the time to the first output byte beside the whole run.
func execBoth(b *testing.B, script string, bytes int64) {
	rc, base := benchExecNode(b)
	ctx := context.Background()
	b.Run("via=driver", func(b *testing.B) {
		b.SetBytes(bytes)
		var first time.Duration
		for b.Loop() {
			r := base
			r.Args = []string{"-c", script}
			t0 := time.Now()
			var got time.Duration
			n := int64(0)
			res, err := rc.Exec(ctx, r, func(o resource.ExecOutput) error {
				if got == 0 {
					got = time.Since(t0)
				}
				n += int64(len(o.Data))
				return nil
			})
			if err != nil || res.ExitCode != 0 || (bytes > 0 && n != bytes) {
				b.Fatalf("%v %+v, %d bytes", err, res, n)
			}
			first += got
		}
		b.ReportMetric(float64(first.Microseconds())/float64(b.N)/1000, "ms-to-first-byte")
	})
	b.Run("via=direct", func(b *testing.B) {
		b.SetBytes(bytes)
		var first time.Duration
		buf := make([]byte, 32<<10)
		for b.Loop() {
			t0 := time.Now()
			cmd := exec.Command("sh", "-c", script)
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			var got time.Duration
			n := int64(0)
			for {
				k, err := out.Read(buf)
				if k > 0 && got == 0 {
					got = time.Since(t0)
				}
				n += int64(k)
				if err != nil {
					break
				}
			}
			if err := cmd.Wait(); err != nil || (bytes > 0 && n != bytes) {
				b.Fatalf("%v, %d bytes", err, n)
			}
			first += got
		}
		b.ReportMetric(float64(first.Microseconds())/float64(b.N)/1000, "ms-to-first-byte")
	})
}

// BenchmarkExecFirstByte is a command that prints one line: the time to its first
// output byte and to its end.
func BenchmarkExecFirstByte(b *testing.B) { execBoth(b, `echo first`, 0) }

// BenchmarkExec1MiB is a command that prints 1 MiB.
func BenchmarkExec1MiB(b *testing.B) { execBoth(b, `head -c 1048576 /dev/zero`, 1<<20) }
