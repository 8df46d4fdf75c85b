package sdk

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// ServeOption changes how a kind's Serve runs a plugin.
type ServeOption func(*ServeConfig)

// ServeConfig is what ServeOptions set. Kind packages read it; authors use the With
// functions.
type ServeConfig struct {
	// Logger receives the plugin's logs. The default writes hclog JSON to stderr, which
	// the host re-emits under the plugin's name; write nothing else to stderr or stdout.
	Logger hclog.Logger
	// ParentCheckInterval is how often the plugin checks that the host that started it is
	// still alive, exiting when it is gone (even after a SIGKILL). 0 disables the check.
	ParentCheckInterval time.Duration
}

// DefaultServeConfig returns the settings Serve starts from before applying options.
func DefaultServeConfig() ServeConfig {
	return ServeConfig{ParentCheckInterval: 200 * time.Millisecond}
}

// WithLogger sets the logger the plugin's calls get from Logger(ctx).
func WithLogger(l hclog.Logger) ServeOption {
	return func(c *ServeConfig) { c.Logger = l }
}

// WithParentCheckInterval sets how often the plugin checks that its host is alive.
func WithParentCheckInterval(d time.Duration) ServeOption {
	return func(c *ServeConfig) { c.ParentCheckInterval = d }
}
