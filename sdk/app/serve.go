package app

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
)

// Serve runs a as an app plugin until the host stops it. desc.Serves names the app. Call
// it from main; it does not return.
func Serve(desc sdk.Description, a App, opts ...sdk.ServeOption) {
	desc.Kind = sdk.KindApp
	var configure func(context.Context, json.RawMessage) error
	if c, ok := a.(sdk.Configurer); ok {
		configure = c.Configure
	}
	s := &server{a: a}
	wire.ServeKind(desc, configure, func(g *grpc.Server) { pb.RegisterAppServer(g, s) }, opts)
}

type server struct {
	pb.UnimplementedAppServer
	a App
}

func unsupported(what string) error {
	return wire.ToStatus(sdk.Errorf(sdk.CodeUnsupported, "this app has no %s", what))
}

func (s *server) Schema(ctx context.Context, _ *pb.SchemaRequest) (*pb.SchemaResponse, error) {
	sc, err := s.a.Schema(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.SchemaResponse{Schema: sc.JSON, Icon: sc.Icon, IconMediaType: sc.IconMediaType}, nil
}

func (s *server) Requests(ctx context.Context, req *pb.RequestsRequest) (*pb.RequestsResponse, error) {
	if !sdk.ValidTenant(req.GetTenant()) {
		return nil, wire.ToStatus(sdk.Invalid("tenant", "tenant %q is not DNS-safe", req.GetTenant()))
	}
	reqs, err := s.a.Requests(ctx, RequestsRequest{Tenant: req.GetTenant(), Domain: req.GetDomain(), Config: req.GetConfig()})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := make([]*pb.ResourceRequest, len(reqs))
	for i, r := range reqs {
		out[i] = &pb.ResourceRequest{Name: r.Name, Type: r.Type, Spec: r.Spec, DependsOn: r.DependsOn}
	}
	return &pb.RequestsResponse{Requests: out}, nil
}

func (s *server) Render(ctx context.Context, req *pb.RenderRequest) (*pb.RenderResponse, error) {
	results := make(map[string]json.RawMessage, len(req.GetResults()))
	for k, v := range req.GetResults() {
		results[k] = v
	}
	nodes, err := s.a.Render(ctx, RenderRequest{Tenant: req.GetTenant(), Domain: req.GetDomain(), Config: req.GetConfig(), Results: results})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := make([]*pb.Node, len(nodes))
	for i, n := range nodes {
		out[i] = &pb.Node{Name: n.Name, Spec: n.Spec}
	}
	return &pb.RenderResponse{Nodes: out}, nil
}

func (s *server) Renames(ctx context.Context, _ *pb.RenamesRequest) (*pb.RenamesResponse, error) {
	r, ok := s.a.(Renamer)
	if !ok {
		return &pb.RenamesResponse{}, nil
	}
	renames, err := r.Renames(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := make([]*pb.Rename, len(renames))
	for i, rn := range renames {
		out[i] = &pb.Rename{From: rn.From, To: rn.To, Since: rn.Since}
	}
	return &pb.RenamesResponse{Renames: out}, nil
}

func (s *server) Operations(ctx context.Context, _ *pb.OperationsRequest) (*pb.OperationsResponse, error) {
	ops, err := s.operations(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := make([]*pb.Operation, len(ops))
	for i, op := range ops {
		out[i] = &pb.Operation{
			Name: op.Name, Title: op.Title, Description: op.Description, Sensitive: op.Sensitive,
			InputSchema: op.Input, TimeoutSeconds: int32(op.TimeoutSeconds), Idempotent: op.Idempotent,
			NeedsRunning: op.NeedsRunning, Concurrent: op.Concurrent, OutputFile: op.OutputFile,
		}
	}
	return &pb.OperationsResponse{Operations: out}, nil
}

// operations are the app's own and, for a RoleSyncer, OperationSyncRoles.
func (s *server) operations(ctx context.Context) ([]Operation, error) {
	var ops []Operation
	if o, ok := s.a.(Operator); ok {
		var err error
		if ops, err = o.Operations(ctx); err != nil {
			return nil, err
		}
	}
	if _, ok := s.a.(RoleSyncer); ok && !slices.ContainsFunc(ops, func(op Operation) bool { return op.Name == OperationSyncRoles }) {
		ops = append(ops, roleSyncOperation())
	}
	return ops, nil
}

func (s *server) VersionGuard(ctx context.Context, _ *pb.VersionGuardRequest) (*pb.VersionGuardResponse, error) {
	g, ok := s.a.(Guarded)
	if !ok {
		return nil, unsupported("version guard")
	}
	vg, err := g.VersionGuard(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.VersionGuardResponse{Version: vg.Version, MaxStep: string(vg.MaxStep), OnDowngrade: string(vg.OnDowngrade)}, nil
}

func (s *server) RoleGroups(ctx context.Context, _ *pb.RoleGroupsRequest) (*pb.RoleGroupsResponse, error) {
	r, ok := s.a.(RoleGrouper)
	if !ok {
		return &pb.RoleGroupsResponse{}, nil
	}
	groups, err := r.RoleGroups(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := make([]*pb.RoleGroup, len(groups))
	for i, g := range groups {
		out[i] = &pb.RoleGroup{Name: g.Name, Description: g.Description, Roles: g.Roles}
	}
	return &pb.RoleGroupsResponse{Groups: out}, nil
}

func (s *server) Command(ctx context.Context, req *pb.CommandRequest) (*pb.CommandResponse, error) {
	ops, err := s.operations(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	i := slices.IndexFunc(ops, func(op Operation) bool { return op.Name == req.GetOperation() })
	if i < 0 {
		return nil, wire.ToStatus(sdk.Errorf(sdk.CodeNotFound, "this app has no operation %q", req.GetOperation()))
	}
	results := make(map[string]json.RawMessage, len(req.GetResults()))
	for k, v := range req.GetResults() {
		results[k] = v
	}
	creq := CommandRequest{
		Operation: req.GetOperation(), Input: req.GetInput(), Tenant: req.GetTenant(),
		Domain: req.GetDomain(), Config: req.GetConfig(), Results: results,
	}
	var cmd Command
	if rs, ok := s.a.(RoleSyncer); ok && creq.Operation == OperationSyncRoles {
		var in RoleSyncInput
		if err := json.Unmarshal(creq.Input, &in); err != nil {
			return nil, wire.ToStatus(sdk.Invalid("input", "the input of %s is not {\"members\": {group: [names]}}: %v", OperationSyncRoles, err))
		}
		cmd, err = rs.RoleSync(ctx, creq, in)
	} else if c, ok := s.a.(Commander); ok {
		cmd, err = c.Command(ctx, creq)
	} else {
		return nil, unsupported("operations that run as commands")
	}
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if err := checkSecretsOnStdin(ops[i], req.GetInput(), cmd); err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.CommandResponse{Node: cmd.Node, Binary: cmd.Binary, Args: cmd.Args, Env: cmd.Env, Stdin: cmd.Stdin, Tty: cmd.TTY}, nil
}

// checkSecretsOnStdin refuses a command that carries a secret input (a writeOnly
// property of the input schema) in its args or env, where a process listing or an
// environment dump would show it: secrets go on stdin.
func checkSecretsOnStdin(op Operation, input json.RawMessage, cmd Command) error {
	for name, value := range SecretInputs(op.Input, input) {
		for _, a := range cmd.Args {
			if strings.Contains(a, value) {
				return sdk.Errorf(sdk.CodeInternal, "operation %s puts secret input %q in its command's args: the app must give it on stdin", op.Name, name)
			}
		}
		for k, v := range cmd.Env {
			if strings.Contains(v, value) {
				return sdk.Errorf(sdk.CodeInternal, "operation %s puts secret input %q in its command's env %s: the app must give it on stdin", op.Name, name, k)
			}
		}
	}
	return nil
}

// SecretInputs returns the non-empty string values of input at the top-level properties
// that schema marks writeOnly, by property name.
func SecretInputs(schema, input json.RawMessage) map[string]string {
	var doc struct {
		Properties map[string]struct {
			WriteOnly bool `json:"writeOnly"`
		} `json:"properties"`
	}
	var values map[string]any
	if json.Unmarshal(schema, &doc) != nil || json.Unmarshal(input, &values) != nil {
		return nil
	}
	out := map[string]string{}
	for name, p := range doc.Properties {
		if v, ok := values[name].(string); ok && p.WriteOnly && v != "" {
			out[name] = v
		}
	}
	return out
}
