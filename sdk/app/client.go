package app

import (
	"context"

	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
)

func init() {
	wire.Clients[sdk.KindApp] = func(cc grpc.ClientConnInterface) any { return &Client{rpc: pb.NewAppClient(cc)} }
}

// Client calls an app plugin; get one from the client package. Its methods return
// *sdk.Error values.
type Client struct {
	rpc pb.AppClient
}

// Schema returns the app's options.
func (c *Client) Schema(ctx context.Context) (Schema, error) {
	r, err := c.rpc.Schema(ctx, &pb.SchemaRequest{})
	if err != nil {
		return Schema{}, wire.FromStatus(err)
	}
	return Schema{JSON: r.GetSchema(), Icon: r.GetIcon(), IconMediaType: r.GetIconMediaType()}, nil
}

// Requests returns the resources a configuration needs.
func (c *Client) Requests(ctx context.Context, req RequestsRequest) ([]ResourceRequest, error) {
	r, err := c.rpc.Requests(ctx, &pb.RequestsRequest{Tenant: req.Tenant, Domain: req.Domain, Config: req.Config})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]ResourceRequest, len(r.GetRequests()))
	for i, rr := range r.GetRequests() {
		out[i] = ResourceRequest{Name: rr.GetName(), Type: rr.GetType(), Spec: rr.GetSpec(), DependsOn: rr.GetDependsOn()}
	}
	return out, nil
}

// Render returns the nodes that run the app.
func (c *Client) Render(ctx context.Context, req RenderRequest) ([]Node, error) {
	results := make(map[string][]byte, len(req.Results))
	for k, v := range req.Results {
		results[k] = v
	}
	r, err := c.rpc.Render(ctx, &pb.RenderRequest{Tenant: req.Tenant, Domain: req.Domain, Config: req.Config, Results: results})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]Node, len(r.GetNodes()))
	for i, n := range r.GetNodes() {
		out[i] = Node{Name: n.GetName(), Spec: n.GetSpec()}
	}
	return out, nil
}

// Renames returns the app's option renames; none for an app without.
func (c *Client) Renames(ctx context.Context) ([]Rename, error) {
	r, err := c.rpc.Renames(ctx, &pb.RenamesRequest{})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]Rename, len(r.GetRenames()))
	for i, rn := range r.GetRenames() {
		out[i] = Rename{From: rn.GetFrom(), To: rn.GetTo(), Since: rn.GetSince()}
	}
	return out, nil
}

// Operations returns the app's operations.
func (c *Client) Operations(ctx context.Context) ([]Operation, error) {
	r, err := c.rpc.Operations(ctx, &pb.OperationsRequest{})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]Operation, len(r.GetOperations()))
	for i, op := range r.GetOperations() {
		out[i] = Operation{
			Name: op.GetName(), Title: op.GetTitle(), Description: op.GetDescription(), Sensitive: op.GetSensitive(),
			Input: op.GetInputSchema(), TimeoutSeconds: int(op.GetTimeoutSeconds()), Idempotent: op.GetIdempotent(),
			NeedsRunning: op.GetNeedsRunning(), Concurrent: op.GetConcurrent(), OutputFile: op.GetOutputFile(),
		}
	}
	return out, nil
}

// Command returns the command that runs an operation with an input; sdk.CodeUnsupported
// if the app's operations do not run as commands.
func (c *Client) Command(ctx context.Context, req CommandRequest) (Command, error) {
	results := make(map[string][]byte, len(req.Results))
	for k, v := range req.Results {
		results[k] = v
	}
	r, err := c.rpc.Command(ctx, &pb.CommandRequest{
		Operation: req.Operation, Input: req.Input, Tenant: req.Tenant, Domain: req.Domain,
		Config: req.Config, Results: results,
	})
	if err != nil {
		return Command{}, wire.FromStatus(err)
	}
	return Command{Node: r.GetNode(), Binary: r.GetBinary(), Args: r.GetArgs(), Env: r.GetEnv(), Stdin: r.GetStdin(), TTY: r.GetTty()}, nil
}

// VersionGuard returns the app's version guard; sdk.CodeUnsupported if it has none.
func (c *Client) VersionGuard(ctx context.Context) (VersionGuard, error) {
	r, err := c.rpc.VersionGuard(ctx, &pb.VersionGuardRequest{})
	if err != nil {
		return VersionGuard{}, wire.FromStatus(err)
	}
	return VersionGuard{Version: r.GetVersion(), MaxStep: Step(r.GetMaxStep()), OnDowngrade: Downgrade(r.GetOnDowngrade())}, nil
}

// RoleGroups returns the app's role groups.
func (c *Client) RoleGroups(ctx context.Context) ([]RoleGroup, error) {
	r, err := c.rpc.RoleGroups(ctx, &pb.RoleGroupsRequest{})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]RoleGroup, len(r.GetGroups()))
	for i, g := range r.GetGroups() {
		out[i] = RoleGroup{Name: g.GetName(), Description: g.GetDescription(), Roles: g.GetRoles()}
	}
	return out, nil
}

var (
	_ App         = (*Client)(nil)
	_ Renamer     = (*Client)(nil)
	_ Operator    = (*Client)(nil)
	_ Commander   = (*Client)(nil)
	_ Guarded     = (*Client)(nil)
	_ RoleGrouper = (*Client)(nil)
)
