package wire

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
)

// Handshake is the one fixed handshake of fedhost plugins. The cookie is not a secret:
// it only stops a plugin binary from being run by hand by mistake.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  sdk.ProtocolVersion,
	MagicCookieKey:   "FEDHOST_PLUGIN",
	MagicCookieValue: "b6f3c1a4e2d84f0f9b7a5c3e1d2f4a6b",
}

// MaxMessageSize bounds one gRPC message on both sides; resource results and schemas of
// large apps stay far below it.
const MaxMessageSize = 64 << 20

// GRPCPlugin adapts a gRPC registration (server side) to go-plugin. On the client side it
// hands back the connection itself, which the client package wraps.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Register func(*grpc.Server)
}

// GRPCServer registers the plugin's services.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	p.Register(s)
	return nil
}

// GRPCClient returns the connection to the plugin.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return cc, nil
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// Clients holds, per kind, the constructor of that kind's typed client; each kind package
// registers its own in init, so the client package can hand out typed clients without
// exposing gRPC.
var Clients = map[sdk.Kind]func(grpc.ClientConnInterface) any{}

// RequestValidator checks a resource request against its type's contract before a client
// sends it. The client package sets it; plugins leave it nil and so never link the JSON
// Schema library.
var RequestValidator func(typ string, spec []byte) error
