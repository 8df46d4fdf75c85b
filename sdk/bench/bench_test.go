// Package bench measures what the SDK adds to a plugin call and to a plugin start, against
// the floor of a bare go-plugin gRPC echo plugin, and against calling the provider in the
// same process. Run it with `make bench`; the figures are in docs/benchmarks.md.
//
// Both plugin binaries (testdata/fedhost-resource-echo, testdata/bare-echo) are built with
// `go build` into a temporary directory the first time a benchmark needs them.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk/bench/internal/echo"
	"github.com/fedhost/fedhost/sdk/client"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/benchv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
	"github.com/fedhost/fedhost/sdk/resource"
)

// spec is the trivial call's payload: the SDK sends it as the Provision request's Spec and
// gets it back as the result; the bare plugin sends the same bytes as the Echo payload.
var spec = json.RawMessage(`{"name":"bench","size":"small","tags":["a","b","c"],"replicas":1}`)

var request = resource.Request{Tenant: "t", Instance: "i", Type: "echo", Spec: spec}

// warmup calls are made on a fresh connection before the timer starts.
const warmup = 50

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binaries builds the two plugins once and returns their paths.
func binaries(b *testing.B) (sdkPlugin, barePlugin string) {
	b.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "fedhost-bench-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildDir+string(filepath.Separator),
			"./testdata/fedhost-resource-echo", "./testdata/bare-echo")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "fedhost-resource-echo"), filepath.Join(buildDir, "bare-echo")
}

// --- the three ways to make the call ---

type sdkPlugin struct {
	p *client.Plugin
	r *resource.Client
}

func startSDK(ctx context.Context, path string) (*sdkPlugin, error) {
	p, err := client.Start(ctx, path)
	if err != nil {
		return nil, err
	}
	return &sdkPlugin{p: p, r: p.Resource()}, nil
}

func (s *sdkPlugin) call(ctx context.Context) error {
	res, err := s.r.Provision(ctx, request)
	if err == nil && len(res.Data) != len(spec) {
		err = fmt.Errorf("sdk echo: got %d bytes back, want %d", len(res.Data), len(spec))
	}
	return err
}

func (s *sdkPlugin) kill() { s.p.Kill() }

// bareClient is the host side of the bare plugin: go-plugin's GRPCPlugin handing back the
// generated Echo client.
type bareClient struct{ plugin.NetRPCUnsupportedPlugin }

func (bareClient) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return fmt.Errorf("host side only")
}

func (bareClient) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return pb.NewEchoClient(cc), nil
}

type barePlugin struct {
	c    *plugin.Client
	echo pb.EchoClient
}

func startBare(path string) (*barePlugin, error) {
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{1: {"echo": bareClient{}}},
		Cmd:              exec.Command(path),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           hclog.NewNullLogger(), // as client.Start without WithLogger
	})
	rpc, err := c.Client()
	if err != nil {
		c.Kill()
		return nil, err
	}
	raw, err := rpc.Dispense("echo")
	if err != nil {
		c.Kill()
		return nil, err
	}
	return &barePlugin{c: c, echo: raw.(pb.EchoClient)}, nil
}

func (p *barePlugin) call(ctx context.Context) error {
	m, err := p.echo.Echo(ctx, &pb.EchoMessage{Payload: spec})
	if err == nil && len(m.GetPayload()) != len(spec) {
		err = fmt.Errorf("bare echo: got %d bytes back, want %d", len(m.GetPayload()), len(spec))
	}
	return err
}

func (p *barePlugin) kill() { p.c.Kill() }

var sink resource.Result

func callInProcess(ctx context.Context, p resource.Provider) error {
	res, err := p.Provision(ctx, request)
	sink = res
	return err
}

// --- per-operation timings, for medians ---

type samples []time.Duration

func (s samples) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// report adds the median and p99 of the samples, in µs, to the benchmark's line.
func (s samples) report(b *testing.B, prefix string) {
	b.ReportMetric(us(s.quantile(0.5)), prefix+"median-us")
	b.ReportMetric(us(s.quantile(0.99)), prefix+"p99-us")
}

func timed(s *samples, f func() error) error {
	t0 := time.Now()
	err := f()
	*s = append(*s, time.Since(t0))
	return err
}

func startTimeout(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// BenchmarkCall is a trivial call (a small JSON spec echoed back) through the SDK to a real
// plugin process, through a bare go-plugin gRPC plugin, and in process. paired alternates
// an SDK call and a bare call in one loop, so that both see the same machine; its ns/op is
// the two calls together and ratio-median is the SDK median over the bare median.
func BenchmarkCall(b *testing.B) {
	sdkPath, barePath := binaries(b)
	ctx := startTimeout(b)

	b.Run("sdk", func(b *testing.B) {
		p, err := startSDK(ctx, sdkPath)
		if err != nil {
			b.Fatal(err)
		}
		defer p.kill()
		runCalls(b, func() error { return p.call(ctx) })
	})

	b.Run("bare", func(b *testing.B) {
		p, err := startBare(barePath)
		if err != nil {
			b.Fatal(err)
		}
		defer p.kill()
		runCalls(b, func() error { return p.call(ctx) })
	})

	b.Run("inprocess", func(b *testing.B) {
		var p resource.Provider = echo.Provider{}
		runCalls(b, func() error { return callInProcess(ctx, p) })
	})

	b.Run("paired", func(b *testing.B) {
		s, err := startSDK(ctx, sdkPath)
		if err != nil {
			b.Fatal(err)
		}
		defer s.kill()
		p, err := startBare(barePath)
		if err != nil {
			b.Fatal(err)
		}
		defer p.kill()
		for range warmup {
			if err := s.call(ctx); err != nil {
				b.Fatal(err)
			}
			if err := p.call(ctx); err != nil {
				b.Fatal(err)
			}
		}
		sdkTimes, bareTimes := make(samples, 0, b.N), make(samples, 0, b.N)
		sdkCall := func() error { return timed(&sdkTimes, func() error { return s.call(ctx) }) }
		bareCall := func() error { return timed(&bareTimes, func() error { return p.call(ctx) }) }
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			first, second := sdkCall, bareCall
			if i%2 == 1 {
				first, second = bareCall, sdkCall
			}
			if err := first(); err != nil {
				b.Fatal(err)
			}
			if err := second(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		sdkTimes.report(b, "sdk-")
		bareTimes.report(b, "bare-")
		b.ReportMetric(float64(sdkTimes.quantile(0.5))/float64(bareTimes.quantile(0.5)), "ratio-median")
	})
}

func runCalls(b *testing.B, call func() error) {
	for range warmup {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	times := make(samples, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := timed(&times, call); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	times.report(b, "")
}

// BenchmarkStart is a plugin start: from launching the binary to the first successful
// call. Stopping the plugin is not timed. paired alternates an SDK start and a bare start,
// as BenchmarkCall/paired does for calls.
func BenchmarkStart(b *testing.B) {
	sdkPath, barePath := binaries(b)
	ctx := startTimeout(b)

	startSDKOnce := func() (func(), error) {
		p, err := startSDK(ctx, sdkPath)
		if err != nil {
			return nil, err
		}
		if err := p.call(ctx); err != nil {
			p.kill()
			return nil, err
		}
		return p.kill, nil
	}
	startBareOnce := func() (func(), error) {
		p, err := startBare(barePath)
		if err != nil {
			return nil, err
		}
		if err := p.call(ctx); err != nil {
			p.kill()
			return nil, err
		}
		return p.kill, nil
	}

	b.Run("sdk", func(b *testing.B) { runStarts(b, startSDKOnce) })
	b.Run("bare", func(b *testing.B) { runStarts(b, startBareOnce) })

	b.Run("paired", func(b *testing.B) {
		// One start of each outside the timings: the page cache then holds both binaries.
		for _, start := range []func() (func(), error){startSDKOnce, startBareOnce} {
			kill, err := start()
			if err != nil {
				b.Fatal(err)
			}
			kill()
		}
		sdkTimes, bareTimes := make(samples, 0, b.N), make(samples, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			order := []struct {
				start func() (func(), error)
				times *samples
			}{{startSDKOnce, &sdkTimes}, {startBareOnce, &bareTimes}}
			if i%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, o := range order {
				t0 := time.Now()
				kill, err := o.start()
				d := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				*o.times = append(*o.times, d)
				b.StopTimer()
				kill()
				b.StartTimer()
			}
		}
		b.StopTimer()
		sdkTimes.report(b, "sdk-")
		bareTimes.report(b, "bare-")
		b.ReportMetric(float64(sdkTimes.quantile(0.5))/float64(bareTimes.quantile(0.5)), "ratio-median")
	})
}

func runStarts(b *testing.B, start func() (func(), error)) {
	kill, err := start() // warm the page cache with the binary
	if err != nil {
		b.Fatal(err)
	}
	kill()
	times := make(samples, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		kill, err := start()
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, d)
		b.StopTimer()
		kill()
		b.StartTimer()
	}
	b.StopTimer()
	times.report(b, "")
}
