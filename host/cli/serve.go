package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk"
)

func (e *env) serveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the host: plugins, store, job queue and HTTP API (the embedded default without a config file)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return e.serve(c.Context()) },
	}
}

func (e *env) serve(ctx context.Context) error {
	cfg, err := e.load()
	if err != nil {
		return err
	}
	log := e.logger(cfg)
	if cfg.File != "" {
		log.Info("configuration read", "file", cfg.File)
	}

	st, err := store.Open(ctx, store.Config{Database: cfg.Database, DataDir: cfg.DataDir})
	if err != nil {
		return err
	}
	defer st.Close()

	manager, err := plugins.New(plugins.Options{
		Dir:      cfg.PluginDir,
		DataDir:  cfg.DataDir,
		Logger:   log.Named("plugin"),
		Settings: pluginSettings(cfg),
	})
	if err != nil {
		return err
	}
	if err := manager.Start(ctx); err != nil {
		return err
	}
	defer manager.Stop()
	for _, p := range manager.Plugins() {
		d := p.Description()
		log.Info("plugin started", "plugin", d.String(), "serves", d.Serves)
	}

	cat, err := catalog.Load(ctx, manager)
	if err != nil {
		return err
	}
	engine := deploy.New(deploy.Options{Store: st, Plugins: manager, Catalog: cat, Environment: cfg.Resources, Logger: log.Named("deploy")})
	q, err := queue.New(st, queue.Config{Builder: engine, Logger: slogFrom(log.Named("queue"))})
	if err != nil {
		return err
	}
	engine.SetQueue(q)
	if err := engine.FailLost(ctx); err != nil {
		return err
	}
	if err := q.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := q.Stop(stopCtx); err != nil {
			log.Error("stopping the job queue", "error", err)
		}
	}()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen (%s): %w", cfg.Listen, err)
	}
	app := api.New(api.Deps{Plugins: manager, Engine: engine, Store: st, Version: Version})
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	log.Info("serving", "address", "http://"+ln.Addr().String(), "data_dir", cfg.DataDir)

	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping")
	return app.ShutdownWithTimeout(10 * time.Second)
}

// pluginSettings gives each plugin the settings of fedhost.hcl: a provider those of the
// resource block that names it, a registrar those of its block, an app none. A provider
// or registrar the configuration does not name runs unconfigured: it is installed but
// not in use.
func pluginSettings(cfg *config.Config) func(sdk.Description) (json.RawMessage, bool) {
	return func(d sdk.Description) (json.RawMessage, bool) {
		switch d.Kind {
		case sdk.KindResource:
			for _, r := range cfg.Resources {
				if r.Provider == d.Name {
					return r.Settings, true
				}
			}
			return nil, false
		case sdk.KindRegistrar:
			for _, r := range cfg.Registrars {
				if r.Name == d.Name {
					return r.Settings, true
				}
			}
			return nil, false
		}
		return nil, true
	}
}
