package plugins

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

// State is the life state of a supervised plugin.
type State string

// The plugin states.
const (
	StateStarting   State = "starting"
	StateHealthy    State = "healthy"
	StateRestarting State = "restarting"
	StateRefused    State = "refused"
	StateStopped    State = "stopped"
)

// Options configure a Manager.
type Options struct {
	// Dir is the plugin directory; its plugins.lock must list every binary.
	Dir string
	// DataDir is the host's data directory; each plugin gets DataDir/plugins/<name>.
	DataDir string
	Logger  hclog.Logger
	// Settings returns the settings (JSON) of a started plugin, nil or empty for "{}";
	// ok false leaves a plugin the configuration does not use unconfigured.
	Settings func(sdk.Description) (settings json.RawMessage, ok bool)
	// HealthInterval is the time between health pings (10 s by default); a plugin whose
	// process ended is noticed within ExitPoll (500 ms by default).
	HealthInterval, ExitPoll time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart (1 s and 1 min by default);
	// the wait doubles at each crash that follows a restart within MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Observer, when set, is told of every start, restart and call of a plugin.
	Observer Observer
}

// Observer is told what the plugins do, by plugin name; the metrics count it.
type Observer interface {
	// Started is a plugin process that started and took its settings; Restarted one
	// that did so again after a crash or failed health ping.
	Started(plugin string)
	Restarted(plugin string)
	// Called is a call of the host to a plugin: the method and how long it took.
	Called(plugin, method string, took time.Duration)
}

// Manager starts and supervises the plugins of a directory.
type Manager struct {
	opts    Options
	lock    Lock
	plugins []*Plugin
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Plugin is one supervised plugin binary.
type Plugin struct {
	Binary
	m *Manager

	mu       sync.Mutex
	client   *client.Plugin
	desc     sdk.Description
	state    State
	lastErr  error
	restarts int
}

// Status is a snapshot of a supervised plugin.
type Status struct {
	Binary
	Description sdk.Description
	State       State
	Restarts    int
	Err         error
}

// New finds the plugins of opts.Dir and reads its lock; it starts nothing.
func New(opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	defaults := map[*time.Duration]time.Duration{
		&opts.HealthInterval: 10 * time.Second, &opts.ExitPoll: 500 * time.Millisecond,
		&opts.MinBackoff: time.Second, &opts.MaxBackoff: time.Minute,
	}
	for field, d := range defaults {
		if *field <= 0 {
			*field = d
		}
	}
	binaries, err := Discover(opts.Dir)
	if err != nil {
		return nil, err
	}
	lock, err := ReadLock(opts.Dir)
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, lock: lock}
	for _, b := range binaries {
		m.plugins = append(m.plugins, &Plugin{Binary: b, m: m, state: StateStopped})
	}
	return m, nil
}

// Start starts every plugin, each checked against the lock by go-plugin's SecureConfig,
// configures it and supervises it until Stop. A plugin that is not locked, changed since
// it was locked, or fails to start makes Start stop the others and fail: a host does not
// run with a plugin it cannot trust.
func (m *Manager) Start(ctx context.Context) error {
	for _, p := range m.plugins {
		if err := p.start(ctx); err != nil {
			m.Stop()
			return err
		}
	}
	superviseCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	for _, p := range m.plugins {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			p.supervise(superviseCtx)
		}()
	}
	return nil
}

// Stop ends supervision and stops every plugin: the instance providers first, whose
// nodes stop with them, then the others, whose managed servers those nodes used. It is
// safe to call twice.
func (m *Manager) Stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	var first, then []*Plugin
	for _, p := range m.plugins {
		if p.servesInstances() {
			first = append(first, p)
		} else {
			then = append(then, p)
		}
	}
	for _, p := range append(first, then...) {
		p.mu.Lock()
		if p.client != nil {
			p.client.Kill()
			p.client = nil
		}
		p.state = StateStopped
		p.mu.Unlock()
	}
}

// servesInstances reports whether p runs nodes (serves the instance resource type).
func (p *Plugin) servesInstances() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.desc.Serves, contract.Instance)
}

// Plugins returns the supervised plugins in directory order.
func (m *Manager) Plugins() []*Plugin { return m.plugins }

// Find returns the plugin of kind and name; with version "" the newest installed version.
func (m *Manager) Find(kind sdk.Kind, name, version string) (*Plugin, bool) {
	var found *Plugin
	for _, p := range m.plugins {
		if p.Kind != kind || p.Name != name {
			continue
		}
		if version != "" && p.Description().Version == version {
			return p, true
		}
		if version == "" && (found == nil || newer(p.Description().Version, found.Description().Version)) {
			found = p
		}
	}
	return found, found != nil
}

// Client returns the running plugin's client, or an error that says why there is none.
func (p *Plugin) Client() (*client.Plugin, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil || p.state != StateHealthy {
		if p.lastErr != nil {
			return nil, fmt.Errorf("plugin %s is %s: %w", p.ID(), p.state, p.lastErr)
		}
		return nil, fmt.Errorf("plugin %s is %s", p.ID(), p.state)
	}
	return p.client, nil
}

// Description is what the plugin said of itself at its last start.
func (p *Plugin) Description() sdk.Description {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.desc
}

// Status returns a snapshot of the plugin.
func (p *Plugin) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Status{Binary: p.Binary, Description: p.desc, State: p.state, Restarts: p.restarts, Err: p.lastErr}
}

func (p *Plugin) setState(s State, err error) {
	p.mu.Lock()
	p.state, p.lastErr = s, err
	p.mu.Unlock()
}

// start runs the binary once: locked checksum through SecureConfig, describe, configure.
func (p *Plugin) start(ctx context.Context) error {
	m := p.m
	want, ok := m.lock[p.File]
	if !ok {
		err := fmt.Errorf("plugin %s is not in %s: run `fedhost plugins lock` if you trust it", p.Path, LockFile)
		p.setState(StateRefused, err)
		return err
	}
	sum, _ := hex.DecodeString(want)
	p.setState(StateStarting, nil)
	opts := []client.Option{client.WithChecksum(sum), client.WithLogger(m.opts.Logger.Named(p.Name))}
	if m.opts.DataDir != "" {
		// <data>/plugins lets others pass, so a plugin may run a server as an unprivileged
		// user in its own dir; each plugin's dir is its own to open up.
		parent := filepath.Join(m.opts.DataDir, "plugins")
		dir := filepath.Join(parent, p.Name)
		if err := os.MkdirAll(parent, 0o711); err != nil {
			p.setState(StateRefused, err)
			return fmt.Errorf("plugin %s: data directory: %w", p.Path, err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			p.setState(StateRefused, err)
			return fmt.Errorf("plugin %s: data directory: %w", p.Path, err)
		}
		opts = append(opts, client.WithEnv(sdk.DataDirEnv+"="+dir))
	}
	if o := m.opts.Observer; o != nil {
		opts = append(opts, client.WithCallObserver(func(method string, took time.Duration) { o.Called(p.Name, method, took) }))
	}
	c, err := client.Start(ctx, p.Path, opts...)
	if err != nil {
		p.setState(StateRefused, err)
		return err
	}
	desc := c.Description()
	settings, configure := json.RawMessage(nil), true
	if m.opts.Settings != nil {
		settings, configure = m.opts.Settings(desc)
	}
	if err := configureIf(ctx, c, configure, settings); err != nil {
		c.Kill()
		err = fmt.Errorf("plugin %s: settings: %w", p.Path, err)
		p.setState(StateRefused, err)
		return err
	}
	p.mu.Lock()
	p.client, p.desc, p.state, p.lastErr = c, desc, StateHealthy, nil
	p.mu.Unlock()
	if o := m.opts.Observer; o != nil {
		o.Started(p.Name)
	}
	return nil
}

func configureIf(ctx context.Context, c *client.Plugin, configure bool, settings json.RawMessage) error {
	if !configure {
		return nil
	}
	return c.Configure(ctx, settings)
}

// supervise notices a crashed or unhealthy plugin and restarts it with backoff.
func (p *Plugin) supervise(ctx context.Context) {
	log := p.m.opts.Logger.With("plugin", p.ID())
	exitPoll := time.NewTicker(p.m.opts.ExitPoll)
	defer exitPoll.Stop()
	lastPing := time.Now()
	lastStart := time.Now()
	backoff := p.m.opts.MinBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-exitPoll.C:
		}
		p.mu.Lock()
		c := p.client
		p.mu.Unlock()
		var failure error
		switch {
		case c == nil:
			failure = errors.New("not running")
		case c.Exited():
			failure = errors.New("the plugin process exited")
		case time.Since(lastPing) >= p.m.opts.HealthInterval:
			lastPing = time.Now()
			if err := c.Ping(); err != nil {
				failure = fmt.Errorf("health ping: %w", err)
			}
		}
		if failure == nil {
			continue
		}
		if c != nil {
			c.Kill()
		}
		if time.Since(lastStart) > p.m.opts.MaxBackoff {
			backoff = p.m.opts.MinBackoff
		}
		p.mu.Lock()
		p.client = nil
		p.mu.Unlock()
		for {
			p.setState(StateRestarting, failure)
			log.Error("plugin failed, restarting", "error", failure, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, p.m.opts.MaxBackoff)
			lastStart = time.Now()
			err := p.start(ctx)
			if err == nil {
				p.mu.Lock()
				p.restarts++
				n := p.restarts
				p.mu.Unlock()
				log.Info("plugin restarted", "restarts", n)
				if o := p.m.opts.Observer; o != nil {
					o.Restarted(p.Name)
				}
				lastPing = time.Now()
				break
			}
			var checksum *client.ChecksumError
			if errors.As(err, &checksum) {
				log.Error("plugin refused, not restarting it", "error", err)
				return
			}
			failure = err
		}
	}
}
