package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/sdk/client"
)

func (e *env) pluginsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List, lock and check the plugin binaries of the plugin directory",
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "list",
			Short: "Start each locked plugin and show its kind, version, protocol, checksum state and health",
			Args:  cobra.NoArgs,
			RunE:  func(c *cobra.Command, _ []string) error { return e.pluginsList(c.Context()) },
		},
		&cobra.Command{
			Use:   "lock",
			Short: "Record the sha256 of every plugin binary in plugins.lock",
			Args:  cobra.NoArgs,
			RunE:  func(*cobra.Command, []string) error { return e.pluginsLock() },
		},
		&cobra.Command{
			Use:   "check",
			Short: "Start each plugin through its locked checksum and fail on any that is changed, missing or not locked",
			Args:  cobra.NoArgs,
			RunE:  func(c *cobra.Command, _ []string) error { return e.pluginsCheck(c.Context()) },
		},
	)
	return cmd
}

func (e *env) pluginDir() (string, error) {
	cfg, err := e.load()
	if err != nil {
		return "", err
	}
	return cfg.PluginDir, nil
}

func (e *env) pluginsLock() error {
	dir, err := e.pluginDir()
	if err != nil {
		return err
	}
	binaries, err := plugins.Discover(dir)
	if err != nil {
		return err
	}
	old, err := plugins.ReadLock(dir)
	if err != nil {
		old = plugins.Lock{}
	}
	lock := plugins.Lock{}
	for _, b := range binaries {
		sum, err := client.FileSHA256(b.Path)
		if err != nil {
			return fmt.Errorf("plugin %s: %w", b.Path, err)
		}
		lock[b.File] = sum
		switch prev, ok := old[b.File]; {
		case !ok:
			fmt.Fprintf(e.stdout, "added    %s  %s\n", sum, b.File)
		case prev != sum:
			fmt.Fprintf(e.stdout, "changed  %s  %s\n", sum, b.File)
		}
	}
	for file := range old {
		if _, ok := lock[file]; !ok {
			fmt.Fprintf(e.stdout, "removed  %s\n", file)
		}
	}
	if err := lock.Write(dir); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, plugins.LockFile), err)
	}
	fmt.Fprintf(e.stdout, "locked %d plugins in %s\n", len(lock), filepath.Join(dir, plugins.LockFile))
	return nil
}

// probe is what list and check learn of one binary.
type probe struct {
	bin      plugins.Binary
	checksum plugins.Checksum
	version  string
	protocol int
	health   string
	err      error
}

// probeAll verifies each binary against the lock and starts each locked one through
// SecureConfig, then pings and stops it. Changed and unlocked binaries never run.
func probeAll(ctx context.Context, dir string, logger hclog.Logger) ([]probe, plugins.Lock, error) {
	binaries, err := plugins.Discover(dir)
	if err != nil {
		return nil, nil, err
	}
	lock, err := plugins.ReadLock(dir)
	if err != nil {
		return nil, nil, err
	}
	probes := make([]probe, len(binaries))
	for i, b := range binaries {
		pr := probe{bin: b, version: b.Version, health: "-"}
		state, got, err := lock.Verify(b)
		switch {
		case err != nil:
			pr.health, pr.err = "unreadable", fmt.Errorf("plugin %s: %w", b.Path, err)
		case state == plugins.ChecksumUnlocked:
			pr.health, pr.err = "not started", fmt.Errorf("plugin %s is not in %s: run `fedhost plugins lock` if you trust it", b.Path, plugins.LockFile)
		case state == plugins.ChecksumChanged:
			pr.health, pr.err = "refused", &client.ChecksumError{Path: b.Path, Want: lock[b.File], Got: got}
		default:
			pr.health, pr.version, pr.protocol, pr.err = start(ctx, b, lock[b.File], logger)
		}
		pr.checksum = state
		probes[i] = pr
	}
	return probes, lock, nil
}

func start(ctx context.Context, b plugins.Binary, locked string, logger hclog.Logger) (health, version string, protocol int, err error) {
	sum, _ := hex.DecodeString(locked)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := client.Start(ctx, b.Path, client.WithChecksum(sum), client.WithLogger(logger.Named(b.Name)))
	if err != nil {
		var cs *client.ChecksumError
		if errors.As(err, &cs) {
			return "refused", b.Version, 0, err
		}
		return "failed", b.Version, 0, err
	}
	defer p.Kill()
	d := p.Description()
	if err := p.Ping(); err != nil {
		return "unhealthy", d.Version, d.Protocol, fmt.Errorf("plugin %s: health ping: %w", b.Path, err)
	}
	return "healthy", d.Version, d.Protocol, nil
}

func (e *env) pluginsList(ctx context.Context) error {
	cfg, err := e.load()
	if err != nil {
		return err
	}
	probes, _, err := probeAll(ctx, cfg.PluginDir, e.quietLogger(cfg))
	if err != nil {
		return err
	}
	if len(probes) == 0 {
		fmt.Fprintf(e.stdout, "no plugins in %s\n", cfg.PluginDir)
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tKIND\tVERSION\tPROTOCOL\tCHECKSUM\tHEALTH")
	for _, p := range probes {
		protocol := "-"
		if p.protocol > 0 {
			protocol = strconv.Itoa(p.protocol)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.bin.Name, p.bin.Kind, orDash(p.version), protocol, p.checksum, p.health)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, p := range probes {
		if p.err != nil {
			fmt.Fprintf(e.stderr, "%v\n", p.err)
		}
	}
	return nil
}

func (e *env) pluginsCheck(ctx context.Context) error {
	cfg, err := e.load()
	if err != nil {
		return err
	}
	probes, lock, err := probeAll(ctx, cfg.PluginDir, e.quietLogger(cfg))
	if err != nil {
		return err
	}
	var problems []string
	present := map[string]bool{}
	for _, p := range probes {
		present[p.bin.File] = true
		if p.err != nil {
			problems = append(problems, p.err.Error())
		}
	}
	var missing []string
	for file := range lock {
		if !present[file] {
			missing = append(missing, file)
		}
	}
	sort.Strings(missing)
	for _, file := range missing {
		problems = append(problems, fmt.Sprintf("plugin %s is in %s but not installed: reinstall it or run `fedhost plugins lock`",
			filepath.Join(cfg.PluginDir, file), plugins.LockFile))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\nfedhost: "))
	}
	fmt.Fprintf(e.stdout, "%d plugins match %s and answer\n", len(probes), filepath.Join(cfg.PluginDir, plugins.LockFile))
	return nil
}

// quietLogger keeps the start and stop lines of every probed plugin out of a listing,
// unless the operator asked for debug logs.
func (e *env) quietLogger(cfg *config.Config) hclog.Logger {
	l := e.logger(cfg)
	if l.GetLevel() < hclog.Warn && l.GetLevel() > hclog.Debug {
		l.SetLevel(hclog.Warn)
	}
	return l
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
