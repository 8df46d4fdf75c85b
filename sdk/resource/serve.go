package resource

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
)

// Serve runs p as a resource provider plugin until the host stops it. desc.Serves lists
// the resource types p answers. Call it from main; it does not return.
func Serve(desc sdk.Description, p Provider, opts ...sdk.ServeOption) {
	desc.Kind = sdk.KindResource
	var configure func(context.Context, json.RawMessage) error
	if c, ok := p.(sdk.Configurer); ok {
		configure = c.Configure
	}
	s := newServer(p, desc.Serves)
	wire.ServeKind(desc, configure, func(g *grpc.Server) { pb.RegisterResourceProviderServer(g, s) }, opts)
}

type server struct {
	pb.UnimplementedResourceProviderServer
	p     Provider
	types []string

	execsMu sync.Mutex
	execs   map[string]context.CancelFunc // running Exec calls by exec_id, for StopExec
	// early holds the exec_ids StopExec was asked for before their Exec call came (a
	// cancel right after the start): such an Exec runs nothing. Kept a minute, at most
	// maxEarlyStops.
	early map[string]time.Time
}

func newServer(p Provider, types []string) *server {
	return &server{p: p, types: types, execs: map[string]context.CancelFunc{}, early: map[string]time.Time{}}
}

const (
	maxEarlyStops = 1024
	maxExecID     = 64 // bytes of an exec_id (the host's are 26)
)

func (s *server) check(tenant, instance, typ string) error {
	if err := checkNames(tenant, instance); err != nil {
		return err
	}
	return s.checkType(typ)
}

func checkNames(tenant, instance string) error {
	if !sdk.ValidTenant(tenant) {
		return sdk.Invalid("tenant", "tenant %q is not DNS-safe: lower case letters, digits and dashes, at most 32, starting with a letter", tenant)
	}
	if !sdk.ValidInstance(instance) {
		return sdk.Invalid("instance", "instance %q is not DNS-safe: lower case letters, digits and dashes, at most 63, starting with a letter", instance)
	}
	return nil
}

func (s *server) checkType(typ string) error {
	if !slices.Contains(s.types, typ) {
		return sdk.Invalid("type", "this provider serves %v, not %q", s.types, typ)
	}
	return nil
}

func (s *server) Validate(ctx context.Context, req *pb.ValidateRequest) (*pb.ValidateResponse, error) {
	if err := s.checkType(req.GetType()); err != nil {
		return nil, wire.ToStatus(err)
	}
	if v, ok := s.p.(Validator); ok {
		if err := v.Validate(ctx, req.GetType(), req.GetSpec()); err != nil {
			return nil, wire.ToStatus(err)
		}
	}
	return &pb.ValidateResponse{}, nil
}

func (s *server) Provision(ctx context.Context, req *pb.ProvisionRequest) (*pb.ProvisionResponse, error) {
	if err := s.check(req.GetTenant(), req.GetInstance(), req.GetType()); err != nil {
		return nil, wire.ToStatus(err)
	}
	res, err := s.p.Provision(ctx, Request{
		Tenant:   req.GetTenant(),
		Instance: req.GetInstance(),
		Type:     req.GetType(),
		Spec:     req.GetSpec(),
		Secrets:  req.GetSecrets(),
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.ProvisionResponse{Result: res.Data, Secrets: res.Secrets}, nil
}

func (s *server) Deprovision(ctx context.Context, req *pb.DeprovisionRequest) (*pb.DeprovisionResponse, error) {
	if err := s.check(req.GetTenant(), req.GetInstance(), req.GetType()); err != nil {
		return nil, wire.ToStatus(err)
	}
	err := s.p.Deprovision(ctx, DeprovisionRequest{
		Tenant:   req.GetTenant(),
		Instance: req.GetInstance(),
		Type:     req.GetType(),
		Spec:     req.GetSpec(),
		Retain:   req.GetRetain(),
	})
	return &pb.DeprovisionResponse{}, wire.ToStatus(err)
}

func (s *server) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	if err := s.check(req.GetTenant(), req.GetInstance(), req.GetType()); err != nil {
		return nil, wire.ToStatus(err)
	}
	r, ok := s.p.(StatusReporter)
	if !ok {
		return nil, wire.ToStatus(sdk.Errorf(sdk.CodeUnsupported, "this provider does not report status"))
	}
	st, err := r.Status(ctx, Request{Tenant: req.GetTenant(), Instance: req.GetInstance(), Type: req.GetType(), Spec: req.GetSpec()})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.StatusResponse{State: st.State, Message: st.Message, Result: st.Data}, nil
}

func (s *server) Reveal(ctx context.Context, req *pb.RevealRequest) (*pb.RevealResponse, error) {
	r, ok := s.p.(Revealer)
	if !ok {
		return nil, wire.ToStatus(sdk.Errorf(sdk.CodeUnsupported, "this provider keeps no secrets"))
	}
	if err := checkNames(req.GetTenant(), req.GetInstance()); err != nil {
		return nil, wire.ToStatus(err)
	}
	v, err := r.Reveal(ctx, req.GetTenant(), req.GetInstance(), req.GetReference())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.RevealResponse{Value: v}, nil
}

func (s *server) Exec(req *pb.ExecRequest, stream pb.ResourceProvider_ExecServer) error {
	x, ok := s.p.(Executor)
	if !ok {
		return wire.ToStatus(sdk.Errorf(sdk.CodeUnsupported, "this provider runs no commands"))
	}
	if err := s.check(req.GetTenant(), req.GetInstance(), req.GetType()); err != nil {
		return wire.ToStatus(err)
	}
	if req.GetTimeoutSeconds() < 0 {
		return wire.ToStatus(sdk.Invalid("timeout_seconds", "the timeout is negative"))
	}
	if len(req.GetExecId()) > maxExecID {
		return wire.ToStatus(sdk.Invalid("exec_id", "the exec_id is longer than %d bytes", maxExecID))
	}
	ctx := stream.Context()
	if id := req.GetExecId(); id != "" {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		s.execsMu.Lock()
		if _, taken := s.execs[id]; taken {
			s.execsMu.Unlock()
			return wire.ToStatus(sdk.Invalid("exec_id", "another running Exec has this exec_id: choose one per call"))
		}
		if _, stopped := s.early[id]; stopped {
			delete(s.early, id)
			s.execsMu.Unlock()
			return wire.ToStatus(sdk.Errorf(sdk.CodeUnavailable, "the exec was stopped before it started"))
		}
		s.execs[id] = stop
		s.execsMu.Unlock()
		defer func() {
			s.execsMu.Lock()
			delete(s.execs, id)
			s.execsMu.Unlock()
		}()
	}
	res, err := x.Exec(ctx, ExecRequest{
		Tenant: req.GetTenant(), Instance: req.GetInstance(), Type: req.GetType(), Spec: req.GetSpec(),
		Binary: req.GetBinary(), Args: req.GetArgs(), Env: req.GetEnv(), Stdin: req.GetStdin(), TTY: req.GetTty(),
		Timeout: time.Duration(req.GetTimeoutSeconds()) * time.Second,
	}, func(o ExecOutput) error {
		return stream.Send(&pb.ExecEvent{Stream: o.Stream, Data: o.Data})
	})
	if err != nil {
		return wire.ToStatus(err)
	}
	return stream.Send(&pb.ExecEvent{Stream: "exit", ExitCode: int32(res.ExitCode), TimedOut: res.TimedOut, Status: res.Status})
}

// StopExec cancels the context of the running Exec named: the provider kills the command,
// and that Exec call ends once the command is gone.
func (s *server) StopExec(_ context.Context, req *pb.StopExecRequest) (*pb.StopExecResponse, error) {
	id := req.GetExecId()
	if id == "" || len(id) > maxExecID {
		return nil, wire.ToStatus(sdk.Invalid("exec_id", "StopExec names the Exec call by its exec_id, at most %d bytes", maxExecID))
	}
	s.execsMu.Lock()
	defer s.execsMu.Unlock()
	stop, running := s.execs[id]
	if running {
		stop()
		return &pb.StopExecResponse{Running: true}, nil
	}
	now := time.Now()
	for early, at := range s.early {
		if now.Sub(at) > time.Minute {
			delete(s.early, early)
		}
	}
	if len(s.early) < maxEarlyStops {
		s.early[id] = now
	}
	return &pb.StopExecResponse{}, nil
}
