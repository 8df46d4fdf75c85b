package wire

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
)

// StartConfig says how to start one plugin binary.
type StartConfig struct {
	Path string
	Kind sdk.Kind
	// Checksum is the sha256 the binary must have; nil starts it unchecked.
	Checksum []byte
	Logger   hclog.Logger
	// Protocols the host offers; nil offers sdk.ProtocolVersion.
	Protocols    []int
	StartTimeout time.Duration
	Env          []string
	// CallObserver, when set, is told the method (e.g. "Provision") and duration of
	// every call the host makes to the plugin.
	CallObserver func(method string, took time.Duration)
}

// Started is a running plugin.
type Started struct {
	Client      *plugin.Client
	Protocol    plugin.ClientProtocol
	Conn        *grpc.ClientConn
	Description sdk.Description
}

// ChecksumError refuses a binary whose sha256 is not the one locked.
type ChecksumError struct {
	Path      string
	Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("plugin %s: sha256 %s does not match plugins.lock (%s): if you trust the new binary, run `fedhost plugins lock`", e.Path, e.Got, e.Want)
}

// FileSHA256 returns the hex sha256 of a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Start runs the binary, checks its checksum through go-plugin's SecureConfig, agrees on a
// protocol version, dispenses the kind and asks the plugin to describe itself.
func Start(ctx context.Context, cfg StartConfig) (*Started, error) {
	if !cfg.Kind.Valid() {
		return nil, fmt.Errorf("plugin %s: unknown kind %q", cfg.Path, cfg.Kind)
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, err
	}
	protocols := cfg.Protocols
	if protocols == nil {
		protocols = []int{sdk.ProtocolVersion}
	}
	sets := make(map[int]plugin.PluginSet, len(protocols))
	for _, v := range protocols {
		sets[v] = plugin.PluginSet{string(cfg.Kind): &GRPCPlugin{}}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Env = append(cmd.Env, LogLevelEnv+"="+logger.GetLevel().String())
	setParentDeathSignal(cmd)
	var secure *plugin.SecureConfig
	if cfg.Checksum != nil {
		secure = &plugin.SecureConfig{Checksum: cfg.Checksum, Hash: sha256.New()}
	}
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: sets,
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           logger,
		StartTimeout:     timeout,
		GRPCDialOptions:  dialOptions(cfg.CallObserver),
	})
	started, err := startOnOwnThread(ctx, client, cfg.Kind)
	if err != nil {
		client.Kill()
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			got, herr := FileSHA256(path)
			if herr != nil {
				got = "unreadable (" + herr.Error() + ")"
			}
			return nil, &ChecksumError{Path: cfg.Path, Want: hex.EncodeToString(cfg.Checksum), Got: got}
		}
		return nil, fmt.Errorf("plugin %s: %w", cfg.Path, err)
	}
	return started, nil
}

// dialOptions are the host's gRPC options: the message size limits, and the observer's
// interceptor when there is one.
func dialOptions(observe func(method string, took time.Duration)) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize))}
	if observe == nil {
		return opts
	}
	timed := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		observe(path.Base(method), time.Since(start))
		return err
	}
	return append(opts, grpc.WithChainUnaryInterceptor(timed))
}

// startOnOwnThread starts the plugin from an OS thread kept for it until it ends. The
// kernel sends the parent-death signal when the thread that forked a child ends, not the
// process, and Go ends a thread when a goroutine locked to it returns: forked from any
// thread, a plugin could be killed by some later goroutine's LockOSThread and return on
// that thread. Holding the thread costs one sleeping thread per running plugin.
func startOnOwnThread(ctx context.Context, client *plugin.Client, kind sdk.Kind) (*Started, error) {
	type result struct {
		started *Started
		err     error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		started, err := dispense(ctx, client, kind)
		done <- result{started, err}
		if err != nil {
			return
		}
		for !client.Exited() {
			time.Sleep(time.Second)
		}
		// Returning locked ends the thread: the plugin it forked has ended already.
	}()
	r := <-done
	return r.started, r.err
}

func dispense(ctx context.Context, client *plugin.Client, kind sdk.Kind) (*Started, error) {
	proto, err := client.Client()
	if err != nil {
		return nil, err
	}
	raw, err := proto.Dispense(string(kind))
	if err != nil {
		return nil, err
	}
	conn, ok := raw.(*grpc.ClientConn)
	if !ok {
		return nil, fmt.Errorf("plugin gave %T instead of a gRPC connection", raw)
	}
	resp, err := pb.NewPluginClient(conn).Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return nil, fmt.Errorf("describe: %w", FromStatus(err))
	}
	desc := DescriptionFromProto(resp)
	if err := desc.Validate(); err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	if desc.Kind != kind {
		return nil, fmt.Errorf("the binary is named as a %s plugin but describes itself as a %s plugin", kind, desc.Kind)
	}
	if negotiated := client.NegotiatedVersion(); negotiated != desc.Protocol {
		return nil, fmt.Errorf("the plugin negotiated protocol %d but describes protocol %d", negotiated, desc.Protocol)
	}
	return &Started{Client: client, Protocol: proto, Conn: conn, Description: desc}, nil
}
