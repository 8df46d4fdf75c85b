package client

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
	"github.com/fedhost/fedhost/sdk/registrar"
	"github.com/fedhost/fedhost/sdk/resource"
	"github.com/fedhost/fedhost/sdk/schema"
)

// Option changes how Start runs a plugin.
type Option func(*wire.StartConfig)

// WithChecksum makes Start refuse the binary unless its sha256 is sum (go-plugin's
// SecureConfig checks it just before the binary runs). The error is a *ChecksumError.
func WithChecksum(sum []byte) Option {
	return func(c *wire.StartConfig) { c.Checksum = sum }
}

// WithLogger re-emits the plugin's logs through l; its level is passed to the plugin.
func WithLogger(l hclog.Logger) Option {
	return func(c *wire.StartConfig) { c.Logger = l }
}

// WithProtocols offers other protocol versions than this sdk's; for tests of refusal.
func WithProtocols(versions ...int) Option {
	return func(c *wire.StartConfig) { c.Protocols = versions }
}

// WithStartTimeout bounds the start and handshake (30 s by default).
func WithStartTimeout(d time.Duration) Option {
	return func(c *wire.StartConfig) { c.StartTimeout = d }
}

// WithEnv adds environment variables (KEY=value) to the plugin's environment.
func WithEnv(env ...string) Option {
	return func(c *wire.StartConfig) { c.Env = append(c.Env, env...) }
}

// WithCallObserver has observe told the method name (e.g. "Provision") and duration of
// every call the host makes to the plugin, for metrics.
func WithCallObserver(observe func(method string, took time.Duration)) Option {
	return func(c *wire.StartConfig) { c.CallObserver = observe }
}

// ChecksumError is the refusal of a binary whose sha256 differs from the locked one; its
// text names the file and both checksums.
type ChecksumError = wire.ChecksumError

// FileSHA256 returns the hex sha256 of a file, as plugins.lock records it.
func FileSHA256(path string) (string, error) { return wire.FileSHA256(path) }

// Binary is what a plugin binary's file name says: fedhost-<kind>-<name>, optionally
// followed by _<version>.
type Binary struct {
	Kind    sdk.Kind
	Name    string
	Version string
}

var binaryPattern = regexp.MustCompile(`^fedhost-(resource|registrar|app)-([a-z][a-z0-9-]*?)(?:_([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*))?$`)

// ParseBinaryName reads a plugin binary's file name; ok is false for other files.
func ParseBinaryName(file string) (b Binary, ok bool) {
	m := binaryPattern.FindStringSubmatch(filepath.Base(file))
	if m == nil {
		return Binary{}, false
	}
	return Binary{Kind: sdk.Kind(m[1]), Name: m[2], Version: m[3]}, true
}

func init() {
	wire.RequestValidator = func(typ string, spec []byte) error {
		if !contract.Known(typ) {
			return nil
		}
		return contract.ValidateRequest(typ, spec)
	}
}

// Plugin is a started plugin process.
type Plugin struct {
	started  *wire.Started
	typed    any
	settings *jsonschema.Schema
}

// Start runs the plugin binary at path, whose kind its file name gives, and returns when
// it has described itself. Kill it when done.
func Start(ctx context.Context, path string, opts ...Option) (*Plugin, error) {
	b, ok := ParseBinaryName(path)
	if !ok {
		return nil, fmt.Errorf("plugin %s: the file name is not fedhost-<kind>-<name>[_<version>] with kind resource, registrar or app", path)
	}
	cfg := wire.StartConfig{Path: path, Kind: b.Kind}
	for _, opt := range opts {
		opt(&cfg)
	}
	s, err := wire.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if b.Name != s.Description.Name {
		s.Client.Kill()
		return nil, fmt.Errorf("plugin %s: the file is named for %q but the plugin describes itself as %q", path, b.Name, s.Description.Name)
	}
	if b.Version != "" && b.Version != s.Description.Version {
		s.Client.Kill()
		return nil, fmt.Errorf("plugin %s: the file is named for version %s but the plugin describes version %s", path, b.Version, s.Description.Version)
	}
	p := &Plugin{started: s, typed: wire.Clients[b.Kind](s.Conn)}
	if raw := s.Description.SettingsSchema; len(raw) > 0 {
		if p.settings, err = schema.Compile("settings.json", raw); err != nil {
			s.Client.Kill()
			return nil, fmt.Errorf("plugin %s: its settings schema: %w", path, err)
		}
	}
	return p, nil
}

// Description is what the plugin said of itself at start.
func (p *Plugin) Description() sdk.Description { return p.started.Description }

// Configure hands the plugin its settings (JSON); they are checked against its settings
// schema first, and a wrong one is an *sdk.Error naming the field.
func (p *Plugin) Configure(ctx context.Context, settings json.RawMessage) error {
	if len(settings) == 0 {
		settings = json.RawMessage("{}")
	}
	if p.settings != nil {
		if err := schema.Validate(p.settings, "settings", settings); err != nil {
			return err
		}
	}
	_, err := pb.NewPluginClient(p.started.Conn).Configure(ctx, &pb.ConfigureRequest{Settings: settings})
	return wire.FromStatus(err)
}

// Ping checks that the plugin answers (gRPC health service).
func (p *Plugin) Ping() error { return p.started.Protocol.Ping() }

// Exited reports whether the plugin process has ended.
func (p *Plugin) Exited() bool { return p.started.Client.Exited() }

// Pid is the plugin's process id, 0 if unknown.
func (p *Plugin) Pid() int {
	if rc := p.started.Client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Kill stops the plugin: gracefully first, then by force. It is safe to call twice.
func (p *Plugin) Kill() { p.started.Client.Kill() }

// Resource is the provider client of a resource plugin, nil for other kinds.
func (p *Plugin) Resource() *resource.Client { c, _ := p.typed.(*resource.Client); return c }

// App is the client of an app plugin, nil for other kinds.
func (p *Plugin) App() *app.Client { c, _ := p.typed.(*app.Client); return c }

// Registrar is the client of a registrar plugin, nil for other kinds.
func (p *Plugin) Registrar() *registrar.Client { c, _ := p.typed.(*registrar.Client); return c }
