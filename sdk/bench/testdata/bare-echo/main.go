// Command bare-echo is the floor of the benchmarks: a go-plugin gRPC plugin with the
// fedhost handshake values and one Echo service, and nothing of the SDK.
package main

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/fedhost/fedhost/sdk/internal/proto/benchv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
)

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
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{1: {"echo": echoPlugin{}}},
		GRPCServer:       plugin.DefaultGRPCServer,
		// The level the SDK's plugins log at by default (go-plugin's own default is Trace).
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info}),
	})
}
