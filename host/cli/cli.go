package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/sdk"
)

// Version is the host's version, set at build time by the Makefile.
var Version = "dev"

// Main runs the command line with args and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "fedhost: %s\n", strings.TrimSpace(err.Error()))
		return 1
	}
	return 0
}

// env is what every command shares: its output and the loaded configuration.
type env struct {
	stdout, stderr io.Writer
	flags          *pflag.FlagSet
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	e := &env{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "fedhost",
		Short:         "fedhost offers web applications to operators through plugins",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	config.RegisterFlags(root.PersistentFlags())
	e.flags = root.PersistentFlags()
	root.AddCommand(e.serveCommand(), e.pluginsCommand(), e.deploymentsCommand(), e.domainsCommand(), e.usersCommand(), e.auditCommand(), e.caCommand(), e.versionCommand())
	return root
}

// load reads the configuration: defaults < fedhost.hcl < FEDHOST_* < flags.
func (e *env) load() (*config.Config, error) {
	cfg, err := config.Load("", os.LookupEnv, e.flags)
	if err != nil {
		return nil, err
	}
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (e *env) logger(cfg *config.Config) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "fedhost",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		Output:     e.stderr,
		JSONFormat: cfg.LogFormat == "json",
	})
}

func (e *env) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of fedhost and of the plugin protocol",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(e.stdout, "fedhost %s (plugin protocol %d)\n", Version, sdk.ProtocolVersion)
			return nil
		},
	}
}
