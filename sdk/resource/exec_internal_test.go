package resource

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedhost/fedhost/sdk/contract"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
)

// slowStopper is an instance provider whose commands take stopDelay to stop once
// cancelled, as a command that handles SIGTERM does: it prints a line, then waits.
type slowStopper struct {
	stopDelay time.Duration
	calls     atomic.Int32
	stopped   chan struct{} // closed when the command is gone
}

func (p *slowStopper) Provision(context.Context, Request) (Result, error) { return Result{}, nil }
func (p *slowStopper) Deprovision(context.Context, DeprovisionRequest) error {
	return nil
}

func (p *slowStopper) Exec(ctx context.Context, _ ExecRequest, output func(ExecOutput) error) (ExecResult, error) {
	p.calls.Add(1)
	if err := output(ExecOutput{Stream: "stdout", Data: []byte("started\n")}); err != nil {
		return ExecResult{}, err
	}
	<-ctx.Done()
	time.Sleep(p.stopDelay)
	close(p.stopped)
	return ExecResult{}, ctx.Err()
}

// serve serves srv on a loopback port and returns a client of it.
func serve(t *testing.T, srv pb.ResourceProviderServer) (*Client, pb.ResourceProviderClient) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	pb.RegisterResourceProviderServer(g, srv)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	rpc := pb.NewResourceProviderClient(cc)
	return &Client{rpc: rpc}, rpc
}

func execReq() ExecRequest {
	return ExecRequest{Tenant: "kit", Instance: "main", Type: contract.Instance, Args: []string{"-c", "true"}}
}

// startAndCancel runs Exec, cancels it at the command's first line and returns its error.
func startAndCancel(t *testing.T, c *Client) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := c.Exec(ctx, execReq(), func(o ExecOutput) error {
		cancel()
		return nil
	})
	return err
}

// A cancelled Exec returns once the provider's command is gone, not before: the host
// gives the node to the next run only then.
func TestCancelledExecReturnsOnceTheCommandIsGone(t *testing.T) {
	p := &slowStopper{stopDelay: 500 * time.Millisecond, stopped: make(chan struct{})}
	c, _ := serve(t, newServer(p, []string{contract.Instance}))
	err := startAndCancel(t, c)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled Exec returned %v, want context.Canceled", err)
	}
	select {
	case <-p.stopped:
	default:
		t.Fatal("Exec returned while the provider's command was still stopping")
	}
}

// countingServer counts the Exec calls that reach the provider's server.
type countingServer struct {
	*server
	opens atomic.Int32
}

func (c *countingServer) Exec(req *pb.ExecRequest, stream pb.ResourceProvider_ExecServer) error {
	c.opens.Add(1)
	return c.server.Exec(req, stream)
}

// An Exec with a context cancelled already sends no call to the provider.
func TestExecOfACancelledContextStartsNothing(t *testing.T) {
	p := &slowStopper{stopped: make(chan struct{})}
	srv := &countingServer{server: newServer(p, []string{contract.Instance})}
	c, _ := serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Exec(ctx, execReq(), func(ExecOutput) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("an Exec of a cancelled context returned %v, want context.Canceled", err)
	}
	if n := srv.opens.Load(); n != 0 {
		t.Fatalf("%d Exec calls reached the provider, want none", n)
	}
}

// oldProvider is a provider of before StopExec: its Exec ends when its call is cancelled,
// and it answers StopExec unimplemented.
type oldProvider struct {
	pb.UnimplementedResourceProviderServer
	stopped chan struct{}
}

func (o *oldProvider) Exec(_ *pb.ExecRequest, stream pb.ResourceProvider_ExecServer) error {
	if err := stream.Send(&pb.ExecEvent{Stream: "stdout", Data: []byte("started\n")}); err != nil {
		return err
	}
	<-stream.Context().Done()
	go func() { time.Sleep(5 * time.Second); close(o.stopped) }() // it kills the command on its own time
	return stream.Context().Err()
}

// With a provider of before StopExec, a cancel cancels the call, as it did: Exec returns
// at once, without waiting for the command.
func TestCancelledExecOfAnOlderProviderCancelsTheCall(t *testing.T) {
	o := &oldProvider{stopped: make(chan struct{})}
	c, _ := serve(t, o)
	err := startAndCancel(t, c)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled Exec returned %v, want context.Canceled", err)
	}
	select {
	case <-o.stopped:
		t.Fatal("Exec waited for the older provider's command, which cannot say it stopped")
	default:
	}
}

// A StopExec that comes before its Exec call (a cancel right after the start) stops that
// Exec before it runs anything; an unknown exec_id is not an error, an empty one is.
func TestStopExecBeforeItsExecRunsNothing(t *testing.T) {
	p := &slowStopper{stopped: make(chan struct{})}
	_, rpc := serve(t, newServer(p, []string{contract.Instance}))
	ctx := context.Background()
	res, err := rpc.StopExec(ctx, &pb.StopExecRequest{ExecId: "early"})
	if err != nil || res.GetRunning() {
		t.Fatalf("StopExec of an Exec not come yet gave %v, %v; want not running, no error", res, err)
	}
	stream, err := rpc.Exec(ctx, &pb.ExecRequest{Tenant: "kit", Instance: "main", Type: contract.Instance, ExecId: "early"})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := stream.Recv(); err == nil {
		t.Fatalf("an Exec stopped before it came ran: %v", ev)
	}
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("the provider's Exec was called %d times, want none", n)
	}
	if _, err := rpc.StopExec(ctx, &pb.StopExecRequest{}); err == nil {
		t.Fatal("StopExec without an exec_id was accepted")
	}
	long := strings.Repeat("x", maxExecID+1)
	if _, err := rpc.StopExec(ctx, &pb.StopExecRequest{ExecId: long}); err == nil {
		t.Fatal("StopExec of an exec_id longer than its bound was accepted")
	}
	stream, err = rpc.Exec(ctx, &pb.ExecRequest{Tenant: "kit", Instance: "main", Type: contract.Instance, ExecId: long})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil || !strings.Contains(err.Error(), "exec_id") {
		t.Fatalf("an Exec with an exec_id longer than its bound gave %v, want a refusal naming exec_id", err)
	}
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("the provider's Exec was called %d times, want none", n)
	}
}
