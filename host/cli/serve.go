package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/metrics"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/host/tfstate"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/ui"
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

	// The registry exists with metrics = "off" too: the counters cost next to nothing
	// and nothing serves them.
	mx := metrics.New(log.Named("metrics"))
	stateKeys, err := tfstate.LoadOrCreate(cfg.DataDir)
	if err != nil {
		return err
	}
	migrationKeys, err := migration.LoadKeys(cfg.DataDir)
	if err != nil {
		return err
	}
	manager, err := plugins.New(plugins.Options{
		Dir:      cfg.PluginDir,
		DataDir:  cfg.DataDir,
		Logger:   log.Named("plugin"),
		Settings: withStateBackend(pluginSettings(cfg), cfg.Listen, stateKeys),
		Observer: mx,
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
	trail := audit.New(st, audit.Options{})
	engine := deploy.New(deploy.Options{
		Store: st, Plugins: manager, Catalog: cat, Environment: cfg.Resources, Logger: log.Named("deploy"), Audit: trail,
		BackupPolicy:      backupPolicy(cfg),
		BuildLogRetention: cfg.BuildLogRetention(),
		AuditRetention:    cfg.AuditRetention(),

		MaxDeploymentsPerOperator: cfg.DeploymentLimit(),
		FrontDoor:                 frontDoor(cfg),
		DomainFollow:              cfg.PendingFollow(),
		DelegationResolver:        cfg.DelegationResolver(),
		DomainSnapshotEvery:       cfg.SnapshotInterval(),
		Registrars:                registrarNames(cfg),
	})
	revision, err := engine.RecordRevision(ctx)
	if err != nil {
		return err
	}
	log.Info("catalog revision", "revision", revision)
	// The scheduler: River's elected leader queues these, so in a cluster one host
	// schedules. What is due is read from the database at each run, so schedules
	// survive restarts, and a run missed while no host ran happens at the next start.
	periodic := []queue.Periodic{
		{ID: "scheduler-tick", Schedule: "@every " + cfg.UpdateCheckInterval, Run: engine.Tick},
		{ID: "retention", Schedule: "@hourly", Run: engine.RunRetention},
	}
	mx.ReadFrom(st, engine)
	// Nodes of the `local` provider exist only on this host: in a cluster (PostgreSQL)
	// their builds run here (docs/architecture.md). On SQLite there is one host, and no
	// routing to keep right when the host's name changes.
	instance, _ := cfg.Resource("instance")
	q, err := queue.New(st, queue.Config{Builder: engine, Runner: engine, Logger: slogFrom(log.Named("queue")), Periodic: periodic, ClientID: clientID(cfg),
		LocalNodes: instance.Provider == "local" && st.RiverPgx() != nil, Finished: mx.BuildFinished, Lost: engine.BuildsLost})
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
	accounts := auth.New(st, auth.Options{Audit: trail})
	// Before EnsureAdmin: a start that fails here must not spend the one-time password.
	operatorOIDC, err := newOperatorOIDC(ctx, cfg.OperatorOIDC, accounts)
	if err != nil {
		return err
	}
	if operatorOIDC != nil {
		log.Info("operators may log in with OpenID Connect", "issuer", cfg.OperatorOIDC.Issuer)
	}
	if password, err := accounts.EnsureAdmin(ctx); err != nil {
		return err
	} else if password != "" {
		// Printed once, to the terminal only: never to the log.
		fmt.Fprintf(e.stdout, "\nfirst start: created the superuser \"admin\" with the one-time password\n\n    %s\n\nthe first sign-in with it must change it; it is not shown again.\n\n", password)
	}
	go keepAudit(ctx, trail, log.Named("audit"))
	defer func() {
		if err := trail.Flush(context.Background()); err != nil {
			log.Error("writing the last audit counts", "error", err)
		}
	}()

	read, write, idle := cfg.Timeouts()
	app := fiber.New(api.Config(api.Server{ReadTimeout: read, WriteTimeout: write, IdleTimeout: idle, TrustedProxies: cfg.Proxies()}))
	apiDeps := api.Deps{Plugins: manager, Engine: engine, Store: st, Auth: accounts, Audit: trail, Logger: log.Named("api"), Version: Version, Migration: migrationKeys,
		PasswordLinkTTL: cfg.PasswordLinkTTL(), TerraformState: stateKeys, PublicURL: cfg.PublicBase()}
	switch cfg.Metrics {
	case config.MetricsLoopback:
		apiDeps.Metrics = mx
	case config.MetricsToken:
		if apiDeps.MetricsToken, err = cfg.MetricsBearer(); err != nil {
			return fmt.Errorf("metrics_token_file: %w", err)
		}
		apiDeps.Metrics = mx
	}
	api.Mount(app, apiDeps)
	uiDeps := ui.Deps{Engine: engine, Store: st, Auth: accounts, Audit: trail, Plugins: manager, Version: Version, OIDC: operatorOIDC,
		SuggestedDomain: cfg.SuggestedDomain, PasswordLinkTTL: cfg.PasswordLinkTTL(), Migration: migrationKeys, PublicURL: cfg.PublicBase()}
	if operatorOIDC != nil {
		uiDeps.OIDCButton = cfg.OperatorOIDC.ButtonLabel
	}
	ui.New(uiDeps).Mount(app)
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	log.Info("serving", "address", "http://"+ln.Addr().String(), "data_dir", cfg.DataDir)
	if route, ok := cfg.Resource("route"); ok {
		https, http := cfg.FrontDoorPorts()
		log.Info("front door", "provider", route.Provider, "https_port", https, "http_port", http,
			"example", "https://feeds.acme.localhost:"+strconv.Itoa(https)+"/")
	}

	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping")
	return app.ShutdownWithTimeout(10 * time.Second)
}

// newOperatorOIDC returns the single sign-on of the operator_oidc block, or nil without one.
func newOperatorOIDC(ctx context.Context, o *config.OperatorOIDC, accounts *auth.Service) (*auth.OIDC, error) {
	if o == nil {
		return nil, nil
	}
	secret, err := o.ClientSecret()
	if err != nil {
		return nil, fmt.Errorf("operator_oidc.client_secret_file: %w", err)
	}
	oidc, err := auth.NewOIDC(ctx, accounts, auth.OIDCConfig{
		Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret, RedirectURL: o.RedirectURL,
		UsernameClaim: o.UsernameClaim, SuperuserGroup: o.SuperuserGroup, CreateUsers: o.CreateUsers,
	})
	if err != nil {
		return nil, fmt.Errorf("operator_oidc: %w", err)
	}
	return oidc, nil
}

// clientID names this fedhost among the processes on its database: the machine and the
// data directory, which two running processes cannot share, and which stay the same
// across a restart, so that it finds the builds it left running itself.
func clientID(cfg *config.Config) string {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		dir = cfg.DataDir
	}
	id := "fedhost@" + host + ":" + dir
	if len(id) > maxClientID {
		// River keeps leader IDs shorter than 128 characters: a long path is hashed.
		sum := sha256.Sum256([]byte(dir))
		id = "fedhost@" + host + ":" + hex.EncodeToString(sum[:8])
		if len(id) > maxClientID {
			id = "fedhost@" + hex.EncodeToString(sum[:16])
		}
	}
	return id
}

// maxClientID is the longest client ID used as is (River refuses leader IDs of 128
// characters or more).
const maxClientID = 100

// keepAudit writes the counts of rate-limited refusals as their windows end. (Pruning
// old events is the retention job's.)
func keepAudit(ctx context.Context, trail *audit.Log, log hclog.Logger) {
	sweep := time.NewTicker(30 * time.Second)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			if err := trail.Sweep(ctx); err != nil {
				log.Error("writing audit counts", "error", err)
			}
		}
	}
}

// backupPolicy gives the engine each app's backup schedule and retention from the
// configuration (validated at load).
func backupPolicy(cfg *config.Config) func(app string) deploy.BackupPolicy {
	return func(app string) deploy.BackupPolicy {
		schedule, keep := cfg.BackupPolicy(app)
		d, err := config.KeepWithin(keep)
		if err != nil {
			d = deploy.DefaultBackupPolicy.KeepWithin
		}
		return deploy.BackupPolicy{Schedule: schedule, KeepWithin: d}
	}
}

// pluginSettings gives each plugin the settings of fedhost.hcl: a provider those of the
// resource block that names it, a registrar those of its block, an app none. A provider
// or registrar the configuration does not name runs unconfigured: it is installed but
// not in use.
// registrarNames names the registrar blocks of cfg (an empty list, not nil, when there
// are none: then no registrar is offered).
func registrarNames(cfg *config.Config) []string {
	names := []string{}
	for _, r := range cfg.Registrars {
		names = append(names, r.Name)
	}
	return names
}

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
		case sdk.KindApp:
			for _, a := range cfg.Apps {
				if a.Name == d.Name {
					return a.Settings, true
				}
			}
		}
		return nil, true
	}
}

// withStateBackend gives a provider whose settings schema has state_address and
// state_key (the terraform provider) the host's state backend and the key its workspace
// tokens are minted with, where its resource block leaves them out, as fillRouteSettings
// gives the route provider the front door's ports.
func withStateBackend(settings func(sdk.Description) (json.RawMessage, bool), listen string, keys *tfstate.Keys) func(sdk.Description) (json.RawMessage, bool) {
	return func(d sdk.Description) (json.RawMessage, bool) {
		raw, ok := settings(d)
		if d.Kind != sdk.KindResource || !ok {
			return raw, ok
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(d.SettingsSchema, &schema) != nil || schema.Properties["state_address"] == nil || schema.Properties["state_key"] == nil {
			return raw, ok
		}
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil || s == nil {
			s = map[string]any{}
		}
		if _, set := s["state_address"]; !set {
			s["state_address"] = "http://" + loopbackOf(listen) + "/api/v1/terraform/state"
		}
		if _, set := s["state_key"]; !set {
			s["state_key"] = keys.StateKey()
		}
		filled, err := json.Marshal(s)
		if err != nil {
			return raw, ok
		}
		return filled, true
	}
}

// loopbackOf is listen with an unspecified host made loopback: the address a plugin on
// this machine reaches the API at.
func loopbackOf(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// frontDoor is where the route provider serves the apps, from the front_door_* settings.
func frontDoor(cfg *config.Config) deploy.FrontDoor {
	https, http := cfg.FrontDoorPorts()
	return deploy.FrontDoor{Addresses: cfg.FrontDoorIPs(), HTTPSPort: https, HTTPPort: http}
}
