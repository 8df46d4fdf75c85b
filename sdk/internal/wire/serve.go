package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
)

// LogLevelEnv carries the host's log level to the plugins it starts.
const LogLevelEnv = "FEDHOST_PLUGIN_LOG_LEVEL"

// ServeKind runs a plugin of one kind until the host stops it. desc's Kind and Protocol
// are set here; configure receives the settings after they passed the settings schema;
// register adds the kind's service to the gRPC server.
func ServeKind(desc sdk.Description, configure func(context.Context, json.RawMessage) error, register func(*grpc.Server), opts []sdk.ServeOption) {
	cfg := sdk.DefaultServeConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	desc.Protocol = sdk.ProtocolVersion
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{
			Name:       desc.Name,
			Output:     os.Stderr,
			JSONFormat: true,
			Level:      hclog.LevelFromString(os.Getenv(LogLevelEnv)),
		})
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "fedhost-%s-%s: %v\n", desc.Kind, desc.Name, err)
		os.Exit(1)
	}
	hclog.SetDefault(cfg.Logger)
	if err := desc.Validate(); err != nil {
		fail(fmt.Errorf("invalid description: %w", err))
	}
	if cfg.ParentCheckInterval > 0 {
		go watchParent(cfg.ParentCheckInterval, cfg.Logger)
	}
	ps := &pluginServer{desc: desc, configure: configure}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			sdk.ProtocolVersion: {string(desc.Kind): &GRPCPlugin{Register: func(s *grpc.Server) {
				pb.RegisterPluginServer(s, ps)
				register(s)
			}}},
		},
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			o = append(o, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize))
			return grpc.NewServer(o...)
		},
		Logger: cfg.Logger,
	})
}

// watchParent exits when the process that started the plugin is gone: the plugin is then
// re-parented, and its parent pid changes.
func watchParent(every time.Duration, log hclog.Logger) {
	parent := os.Getppid()
	for range time.Tick(every) {
		if os.Getppid() != parent {
			log.Warn("host process is gone, exiting", "host_pid", parent)
			os.Exit(3)
		}
	}
}

type pluginServer struct {
	pb.UnimplementedPluginServer
	desc      sdk.Description
	configure func(context.Context, json.RawMessage) error
}

func (s *pluginServer) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return DescriptionToProto(s.desc), nil
}

func (s *pluginServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	raw := req.GetSettings()
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	// The host checked the settings against the settings schema (sdk/client).
	if !json.Valid(raw) {
		return nil, ToStatus(sdk.Invalid("settings", "settings are not JSON"))
	}
	if s.configure == nil {
		return &pb.ConfigureResponse{}, nil
	}
	return &pb.ConfigureResponse{}, ToStatus(s.configure(ctx, raw))
}

// DescriptionToProto converts a description for the wire.
func DescriptionToProto(d sdk.Description) *pb.DescribeResponse {
	return &pb.DescribeResponse{
		Kind:           string(d.Kind),
		Name:           d.Name,
		Version:        d.Version,
		Protocol:       int32(d.Protocol),
		Summary:        d.Summary,
		Serves:         d.Serves,
		SettingsSchema: d.SettingsSchema,
	}
}

// DescriptionFromProto converts a description from the wire.
func DescriptionFromProto(r *pb.DescribeResponse) sdk.Description {
	return sdk.Description{
		Kind:           sdk.Kind(r.GetKind()),
		Name:           r.GetName(),
		Version:        r.GetVersion(),
		Protocol:       int(r.GetProtocol()),
		Summary:        r.GetSummary(),
		Serves:         r.GetServes(),
		SettingsSchema: r.GetSettingsSchema(),
	}
}
