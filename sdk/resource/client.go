package resource

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
)

func init() {
	wire.Clients[sdk.KindResource] = func(cc grpc.ClientConnInterface) any { return &Client{rpc: pb.NewResourceProviderClient(cc)} }
}

// Client calls a resource provider plugin; get one from the client package. Its methods
// return *sdk.Error values.
type Client struct {
	rpc pb.ResourceProviderClient
}

// Validate checks a request without changing anything.
func (c *Client) Validate(ctx context.Context, typ string, spec json.RawMessage) error {
	if err := validateRequest(typ, spec); err != nil {
		return err
	}
	_, err := c.rpc.Validate(ctx, &pb.ValidateRequest{Type: typ, Spec: spec})
	return wire.FromStatus(err)
}

// Provision creates or reconciles a resource.
func (c *Client) Provision(ctx context.Context, req Request) (Result, error) {
	if err := validateRequest(req.Type, req.Spec); err != nil {
		return Result{}, err
	}
	r, err := c.rpc.Provision(ctx, &pb.ProvisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: req.Type, Spec: req.Spec, Secrets: req.Secrets})
	if err != nil {
		return Result{}, wire.FromStatus(err)
	}
	return Result{Data: r.GetResult(), Secrets: r.GetSecrets()}, nil
}

// Deprovision removes a resource.
func (c *Client) Deprovision(ctx context.Context, req DeprovisionRequest) error {
	_, err := c.rpc.Deprovision(ctx, &pb.DeprovisionRequest{Tenant: req.Tenant, Instance: req.Instance, Type: req.Type, Spec: req.Spec, Retain: req.Retain})
	return wire.FromStatus(err)
}

// Status reports a resource's state.
func (c *Client) Status(ctx context.Context, req Request) (Status, error) {
	r, err := c.rpc.Status(ctx, &pb.StatusRequest{Tenant: req.Tenant, Instance: req.Instance, Type: req.Type, Spec: req.Spec})
	if err != nil {
		return Status{}, wire.FromStatus(err)
	}
	return Status{State: r.GetState(), Message: r.GetMessage(), Data: r.GetResult()}, nil
}

// Reveal reads a secret's value.
func (c *Client) Reveal(ctx context.Context, tenant, instance, reference string) ([]byte, error) {
	r, err := c.rpc.Reveal(ctx, &pb.RevealRequest{Tenant: tenant, Instance: instance, Reference: reference})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	return r.GetValue(), nil
}

// Exec runs a command in a node and passes its output to output as it comes.
// Cancelling ctx stops the command, and Exec returns ctx's error once the provider says
// the command and what it started are gone (at most execStopWait later). A provider of
// before StopExec cannot say so: its call is cancelled, and Exec returns at once.
func (c *Client) Exec(ctx context.Context, req ExecRequest, output func(ExecOutput) error) (ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return ExecResult{}, err // nothing to start
	}
	// The call outlives ctx by the stop: it is cancelled only when the provider cannot
	// stop the command through StopExec, or does not within execStopWait.
	callCtx, cancelCall := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCall()
	id := rand.Text()
	stream, err := c.rpc.Exec(callCtx, &pb.ExecRequest{
		Tenant: req.Tenant, Instance: req.Instance, Type: req.Type, Spec: req.Spec,
		Binary: req.Binary, Args: req.Args, Env: req.Env, Stdin: req.Stdin, Tty: req.TTY,
		TimeoutSeconds: int32(req.Timeout / time.Second), ExecId: id,
	})
	if err != nil {
		return ExecResult{}, wire.FromStatus(err)
	}
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ended:
			return
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(callCtx, execStopCall)
		_, err := c.rpc.StopExec(sctx, &pb.StopExecRequest{ExecId: id})
		cancel()
		if err != nil {
			cancelCall() // unimplemented (a provider of before StopExec), or it did not answer
			return
		}
		select {
		case <-ended:
		case <-time.After(execStopWait):
			cancelCall()
		}
	}()
	for {
		ev, err := stream.Recv()
		if ctx.Err() != nil && (err != nil || ev.GetStream() == "exit") {
			return ExecResult{}, ctx.Err() // stopped: however the command ended, it was cancelled
		}
		if errors.Is(err, io.EOF) {
			return ExecResult{}, sdk.Errorf(sdk.CodeInternal, "the provider ended the exec stream without the command's exit")
		}
		if err != nil {
			return ExecResult{}, wire.FromStatus(err)
		}
		if ev.GetStream() == "exit" {
			return ExecResult{ExitCode: int(ev.GetExitCode()), TimedOut: ev.GetTimedOut(), Status: ev.GetStatus()}, nil
		}
		if err := output(ExecOutput{Stream: ev.GetStream(), Data: ev.GetData()}); err != nil {
			return ExecResult{}, err
		}
	}
}

// execStopCall bounds the StopExec call; execStopWait, how long a stopped command may
// take to go before its Exec call is cancelled (the conformance kit's bound on a hang).
const (
	execStopCall = 10 * time.Second
	execStopWait = 30 * time.Second
)

func validateRequest(typ string, spec []byte) error {
	if wire.RequestValidator == nil {
		return nil
	}
	return wire.RequestValidator(typ, spec)
}

var (
	_ Provider       = (*Client)(nil)
	_ Validator      = (*Client)(nil)
	_ StatusReporter = (*Client)(nil)
	_ Revealer       = (*Client)(nil)
	_ Executor       = (*Client)(nil)
)
