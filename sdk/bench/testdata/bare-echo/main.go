// Command bare-echo is the floor of the benchmarks: a go-plugin gRPC plugin with the
// fedhost handshake values and one Echo service, and nothing of the SDK. It does not import
// sdk/internal/wire for the handshake, as that would link (and initialise) the SDK's
// dependencies too; the host side uses wire.Handshake, so a drift fails the handshake.
package main

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/fedhost/fedhost/sdk/internal/proto/benchv1"
)

// handshake has the values of sdk/internal/wire.Handshake.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "FEDHOST_PLUGIN",
	MagicCookieValue: "b6f3c1a4e2d84f0f9b7a5c3e1d2f4a6b",
}

type echoServer struct{ pb.UnimplementedEchoServer }

func (echoServer) Echo(_ context.Context, m *pb.EchoMessage) (*pb.EchoMessage, error) {
	return &pb.EchoMessage{Payload: m.GetPayload()}, nil
}

type echoPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (echoPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterEchoServer(s, echoServer{})
	return nil
}

func (echoPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return pb.NewEchoClient(cc), nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: map[int]plugin.PluginSet{1: {"echo": echoPlugin{}}},
		GRPCServer:       plugin.DefaultGRPCServer,
		// The level the SDK's plugins log at by default (go-plugin's own default is Trace).
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info}),
	})
}
