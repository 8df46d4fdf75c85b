package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/deploy"
)

const (
	serverEnv = "FEDHOST_SERVER"
	tokenEnv  = "FEDHOST_TOKEN"
	// On submit and preview --config names the deployment's configuration; it hides the
	// global --config, so the host's file is then named by FEDHOST_CONFIG.
	deploymentConfigUsage = "the deployment's configuration (JSON), - for stdin (required; name the host's configuration file with env FEDHOST_CONFIG here)"
)

// remote is what the deployments commands share: the API they talk to and how they print.
type remote struct {
	e        *env
	server   string
	token    string
	json     bool
	wait     bool
	interval time.Duration
	http     *http.Client
}

func (e *env) deploymentsCommand() *cobra.Command {
	r := &remote{e: e, http: &http.Client{Timeout: time.Minute}}
	cmd := &cobra.Command{
		Use:   "deployments",
		Short: "Create, configure, deploy and inspect deployments through the API of a running `fedhost serve`",
	}
	cmd.PersistentFlags().StringVar(&r.server, "server", "", "URL of the fedhost API (env "+serverEnv+"; default http:// and the listen address of the configuration)")
	cmd.PersistentFlags().StringVar(&r.token, "token", "", "API token (env "+tokenEnv+"; make one with `fedhost users token`)")
	cmd.PersistentFlags().BoolVar(&r.json, "json", false, "print the API's JSON answer as it is")

	waitFlags := func(c *cobra.Command) *cobra.Command {
		c.Flags().BoolVar(&r.wait, "wait", false, "wait until the build is finished; exit 1 if it did not succeed")
		c.Flags().DurationVar(&r.interval, "poll-interval", time.Second, "time between two looks at the build while waiting")
		return c
	}
	var namespace, name, configFile string
	create := &cobra.Command{
		Use:   "create --namespace NS [--name NAME]",
		Short: "Create an empty deployment and print its id",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			body, _ := json.Marshal(api.CreateRequest{Namespace: namespace, Name: name})
			var d api.Deployment
			if err := r.call(c.Context(), http.MethodPost, "/deployments", body, &d); err != nil {
				return err
			}
			fmt.Fprintln(r.e.stdout, d.ID)
			return nil
		},
	}
	create.Flags().StringVar(&namespace, "namespace", "", "short DNS-safe tenant id, the prefix of everything the deployment owns (required)")
	create.Flags().StringVar(&name, "name", "", "display name (default: the namespace)")
	_ = create.MarkFlagRequired("namespace")

	submit := waitFlags(&cobra.Command{
		Use:   "submit ID --config FILE|-",
		Short: "Validate a configuration (JSON) and queue a build that deploys it; print the build id and state",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body, err := readConfig(configFile, c.InOrStdin())
			if err != nil {
				return err
			}
			return r.build(c.Context(), http.MethodPost, "/deployments/"+url.PathEscape(args[0])+"/submit", body)
		},
	})
	submit.Flags().StringVar(&configFile, "config", "", deploymentConfigUsage)
	_ = submit.MarkFlagRequired("config")

	preview := &cobra.Command{
		Use:   "preview ID --config FILE|-",
		Short: "Show what a submit of a configuration would create, change and delete, changing nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body, err := readConfig(configFile, c.InOrStdin())
			if err != nil {
				return err
			}
			return r.preview(c.Context(), args[0], body)
		},
	}
	preview.Flags().StringVar(&configFile, "config", "", deploymentConfigUsage)
	_ = preview.MarkFlagRequired("config")

	operation := func(use, short, method, suffix string) *cobra.Command {
		return waitFlags(&cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				return r.build(c.Context(), method, "/deployments/"+url.PathEscape(args[0])+suffix, nil)
			},
		})
	}

	var app, snapshot string
	backupCmd := waitFlags(&cobra.Command{
		Use:   "backup ID --app APP",
		Short: "Queue a backup of an app's data now, besides its schedule",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body, _ := json.Marshal(map[string]string{"app": app})
			return r.build(c.Context(), http.MethodPost, "/deployments/"+url.PathEscape(args[0])+"/operations/backup", body)
		},
	})
	backupCmd.Flags().StringVar(&app, "app", "", "the app whose data to back up (required)")
	_ = backupCmd.MarkFlagRequired("app")
	restoreCmd := waitFlags(&cobra.Command{
		Use:   "restore ID --app APP --snapshot SNAPSHOT",
		Short: "Queue the restore of a backup: the app's data since the backup is lost",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body, _ := json.Marshal(map[string]string{"app": app, "snapshot": snapshot})
			return r.build(c.Context(), http.MethodPost, "/deployments/"+url.PathEscape(args[0])+"/operations/restore", body)
		},
	})
	restoreCmd.Flags().StringVar(&app, "app", "", "the app whose data to restore (required)")
	restoreCmd.Flags().StringVar(&snapshot, "snapshot", "", "the backup to restore, as `backups` lists it (required)")
	_ = restoreCmd.MarkFlagRequired("app")
	_ = restoreCmd.MarkFlagRequired("snapshot")
	backupsCmd := &cobra.Command{
		Use:   "backups ID --app APP",
		Short: "List an app's backups, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return r.backups(c.Context(), args[0], app)
		},
	}
	backupsCmd.Flags().StringVar(&app, "app", "", "the app whose backups to list (required)")
	_ = backupsCmd.MarkFlagRequired("app")

	cmd.AddCommand(
		create, submit, preview, backupCmd, restoreCmd, backupsCmd, r.exportCommand(), r.importCommand(), r.directoryUsersCommand(),
		&cobra.Command{
			Use:   "status ID",
			Short: "Show a deployment's state, its nodes with their addresses and its last build",
			Args:  cobra.ExactArgs(1),
			RunE:  func(c *cobra.Command, args []string) error { return r.status(c.Context(), args[0]) },
		},
		&cobra.Command{
			Use:   "list",
			Short: "List the deployments",
			Args:  cobra.NoArgs,
			RunE:  func(c *cobra.Command, _ []string) error { return r.list(c.Context()) },
		},
		&cobra.Command{
			Use:   "builds ID",
			Short: "List the last builds of a deployment, newest first",
			Args:  cobra.ExactArgs(1),
			RunE:  func(c *cobra.Command, args []string) error { return r.builds(c.Context(), args[0]) },
		},
		&cobra.Command{
			Use:   "build BUILD_ID",
			Short: "Show a build's state and its log lines",
			Args:  cobra.ExactArgs(1),
			RunE:  func(c *cobra.Command, args []string) error { return r.showBuild(c.Context(), args[0]) },
		},
		operation("suspend", "Queue a build that stops the deployment's nodes and keeps all its data", http.MethodPost, "/suspend"),
		operation("resume", "Queue a build that deploys the stored configuration again, e.g. after a suspend", http.MethodPost, "/resume"),
		operation("destroy", "Queue a build that removes everything of the deployment but its backups, kept for the grace period", http.MethodDelete, ""),
	)
	cmd.AddCommand(r.runCommands()...)
	return cmd
}

func readConfig(file string, stdin io.Reader) ([]byte, error) {
	name, data, err := file, []byte(nil), error(nil)
	if file == "-" {
		name = "stdin"
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the deployment's configuration: %w", err)
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("the deployment's configuration (%s) is not JSON", name)
	}
	return data, nil
}

// apiError is an error answer of the API; Main prints it as "fedhost: <code> at <location>: <message>",
// with a line "  at <location>: <message>" for each further problem of a refused configuration.
type apiError struct{ body api.Error }

func (e *apiError) Error() string {
	if len(e.body.Details) > 1 {
		lines := []string{fmt.Sprintf("%s: %d problems", e.body.Code, len(e.body.Details))}
		for _, d := range e.body.Details {
			lines = append(lines, fmt.Sprintf("  at %s: %s", d.Location, d.Message))
		}
		return strings.Join(lines, "\n")
	}
	if e.body.Location != "" {
		return fmt.Sprintf("%s at %s: %s", e.body.Code, e.body.Location, e.body.Message)
	}
	return fmt.Sprintf("%s: %s", e.body.Code, e.body.Message)
}

// baseURL is --server, else FEDHOST_SERVER, else the listen address of the configuration.
func (r *remote) baseURL() (string, error) {
	server := r.server
	if server == "" {
		server = os.Getenv(serverEnv)
	}
	if server == "" {
		cfg, err := r.e.load()
		if err != nil {
			return "", err
		}
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return "", fmt.Errorf("listen (%s): %w", cfg.Listen, err)
		}
		// A server listening on every address is reached on this machine through loopback.
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		server = "http://" + net.JoinHostPort(host, port)
	}
	return strings.TrimRight(server, "/") + "/api/v1", nil
}

// call sends body to path and decodes a successful answer into out, after printing it
// with --json. An error answer becomes an *apiError.
func (r *remote) call(ctx context.Context, method, path string, body []byte, out any) error {
	raw, err := r.fetch(ctx, method, path, body)
	if err != nil {
		return err
	}
	if r.json {
		r.printRaw(raw)
	}
	return decode(method, path, raw, out)
}

func decode(method, path string, raw []byte, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not what this fedhost expects (%v): is --server a fedhost of the same version?", method, path, err)
	}
	return nil
}

func (r *remote) printRaw(raw []byte) {
	r.e.stdout.Write(raw)
	if !bytes.HasSuffix(raw, []byte("\n")) {
		fmt.Fprintln(r.e.stdout)
	}
}

func (r *remote) fetch(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	base, err := r.baseURL()
	if err != nil {
		return nil, err
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, reader)
	if err != nil {
		return nil, fmt.Errorf("--server %s: %w", base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	token := r.token
	if token == "" {
		token = os.Getenv(tokenEnv)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the fedhost API at %s (%v): start `fedhost serve` or point --server or %s at it", base, err, serverEnv)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, base+path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return raw, nil
	}
	var answer struct {
		Error *api.Error `json:"error"`
	}
	if json.Unmarshal(raw, &answer) == nil && answer.Error != nil && answer.Error.Code != "" {
		return nil, &apiError{body: *answer.Error}
	}
	return nil, fmt.Errorf("%s %s answered %s without a fedhost error: is --server a fedhost API?", method, base+path, resp.Status)
}

// build starts an operation that answers with a build and prints the build; with --wait
// it waits for the build's end and prints the finished build instead.
func (r *remote) build(ctx context.Context, method, path string, body []byte) error {
	raw, err := r.fetch(ctx, method, path, body)
	if err != nil {
		return err
	}
	var b struct {
		api.Build
		Unmigrated []struct{ App, From, To, Reason string } `json:"unmigrated"`
	}
	if err := decode(method, path, raw, &b); err != nil {
		return err
	}
	for _, u := range b.Unmigrated {
		fmt.Fprintf(r.e.stderr, "fedhost: warning: app %s: the value at %s stays there, not moved to %s: %s\n", u.App, u.From, u.To, u.Reason)
	}
	switch {
	case r.wait:
		return r.waitFor(ctx, b.ID)
	case r.json:
		r.printRaw(raw)
	default:
		fmt.Fprintf(r.e.stdout, "build %s %s\n", b.ID, b.State)
	}
	return nil
}

// waitFor polls a build until it is finished; a build that did not succeed is an error
// that carries its reason.
func (r *remote) waitFor(ctx context.Context, id string) error {
	path := "/builds/" + url.PathEscape(id)
	for {
		raw, err := r.fetch(ctx, http.MethodGet, path, nil)
		if err != nil {
			return err
		}
		var b api.Build
		if err := decode(http.MethodGet, path, raw, &b); err != nil {
			return err
		}
		if b.State != "queued" && b.State != "running" {
			if r.json {
				r.printRaw(raw)
			} else {
				fmt.Fprintf(r.e.stdout, "build %s %s\n", b.ID, b.State)
			}
			if b.State == "succeeded" {
				return nil
			}
			reason := b.Reason
			if reason == "" {
				reason = "no reason given; see `fedhost deployments build " + b.ID + "`"
			}
			return fmt.Errorf("build %s %s: %s", b.ID, b.State, reason)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting for build %s, which goes on: follow it with `fedhost deployments build %s`", id, id)
		case <-time.After(max(r.interval, 10*time.Millisecond)):
		}
	}
}

func (r *remote) preview(ctx context.Context, id string, config []byte) error {
	var p struct {
		Changes []struct{ Action, Kind, Name, Type, Provider string } `json:"changes"`
	}
	if err := r.call(ctx, http.MethodPost, "/deployments/"+url.PathEscape(id)+"/preview", config, &p); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ACTION\tKIND\tNAME\tTYPE\tPROVIDER")
	for _, c := range p.Changes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Action, c.Kind, c.Name, c.Type, orDash(c.Provider))
	}
	return w.Flush()
}

func (r *remote) status(ctx context.Context, id string) error {
	var d api.Deployment
	if err := r.call(ctx, http.MethodGet, "/deployments/"+url.PathEscape(id), nil, &d); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%s\n", d.ID)
	fmt.Fprintf(w, "namespace\t%s\n", d.Namespace)
	fmt.Fprintf(w, "name\t%s\n", d.Name)
	fmt.Fprintf(w, "state\t%s\n", d.State)
	for _, app := range sortedKeys(d.Hosts) {
		fmt.Fprintf(w, "host\t%s\t%s\n", app, d.Hosts[app])
	}
	if d.FrontDoor != nil {
		printFrontDoor(w, *d.FrontDoor)
	}
	for _, node := range sortedKeys(d.Nodes) {
		addrs := d.Nodes[node]
		var list []string
		for _, port := range sortedKeys(addrs) {
			list = append(list, port+"="+addrs[port])
		}
		fmt.Fprintf(w, "node\t%s\t%s\n", node, orDash(strings.Join(list, " ")))
	}
	for _, rt := range d.Retained {
		fmt.Fprintf(w, "retained\t%s\t%s until %s\n", rt.Name, rt.Type, rt.Until.Format(time.RFC3339))
	}
	for _, b := range d.Backups {
		good := "no good backup yet"
		if b.LastSuccessAt != nil {
			good = "last good " + b.LastSuccessAt.Format(time.RFC3339) + " (" + b.LastSnapshot + ")"
		}
		var flags []string
		if b.Stale {
			flags = append(flags, "STALE")
		}
		if b.LastError != "" {
			flags = append(flags, fmt.Sprintf("%d failed since, last: %s", b.Failures, b.LastError))
		}
		fmt.Fprintf(w, "backups\t%s\t%s, %s%s\n", b.App, b.Schedule, good, orNothing(flags))
	}
	if b := d.LastBuild; b != nil {
		fmt.Fprintf(w, "last build\t%s\t%s %s\n", b.ID, b.Operation, b.State)
		if b.Reason != "" {
			fmt.Fprintf(w, "reason\t%s\n", b.Reason)
		}
	} else {
		fmt.Fprintf(w, "last build\t-\n")
	}
	return w.Flush()
}

// printFrontDoor writes each app's URL and certificate, then the zone's records and
// the nameservers to delegate to.
func printFrontDoor(w io.Writer, fd deploy.FrontDoorStatus) {
	for _, a := range fd.Apps {
		if a.App == "" {
			a.App = "sign-in" // the deployment's OpenID provider
		}
		live := "live"
		if !a.Live {
			live = "not live yet"
		}
		fmt.Fprintf(w, "url\t%s\t%s (%s)\n", a.App, a.URL, live)
		if c := a.Certificate; c != nil {
			line := c.State
			if c.Issuer != "" {
				line += ", issued by " + c.Issuer
			}
			if c.NotAfter != nil {
				line += ", expires " + c.NotAfter.Format(time.RFC3339)
			}
			if c.RenewAfter != nil && c.State == deploy.CertificateValid {
				line += ", renewed from " + c.RenewAfter.Format(time.RFC3339)
			}
			if c.FailedBuildID != "" {
				line += "; the old certificate is served; why: `fedhost deployments build " + c.FailedBuildID + "`"
			}
			fmt.Fprintf(w, "certificate\t%s\t%s\n", a.App, line)
		}
	}
	z := fd.Zone
	switch {
	case z == nil:
		return
	case z.Local:
		fmt.Fprintf(w, "zone\t%s\tno DNS record needed: names under .localhost resolve to this machine\n", z.Name)
		return
	case !z.Managed:
		fmt.Fprintf(w, "zone\t%s\tno dns provider here: create these records at your DNS host\n", z.Name)
	case len(z.Nameservers) > 0:
		fmt.Fprintf(w, "zone\t%s\tdelegate the domain to %s at its registrar\n", z.Name, strings.Join(z.Nameservers, ", "))
	default:
		fmt.Fprintf(w, "zone\t%s\tnot served yet\n", z.Name)
	}
	for _, r := range z.Records {
		fmt.Fprintf(w, "record\t%s\t%s %s (%s)\n", r.Name, r.Type, r.Value, r.State)
	}
}

func orNothing(flags []string) string {
	if len(flags) == 0 {
		return ""
	}
	return "; " + strings.Join(flags, "; ")
}

func (r *remote) backups(ctx context.Context, id, app string) error {
	var list []api.Backup
	path := "/deployments/" + url.PathEscape(id) + "/backups?app=" + url.QueryEscape(app)
	if err := r.call(ctx, http.MethodGet, path, nil, &list); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SNAPSHOT\tTIME\tTRIGGER\tDATABASE")
	for _, b := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", b.ID, b.Time.Format(time.RFC3339), orDash(b.Tags["trigger"]), orDash(b.Database))
	}
	return w.Flush()
}

func (r *remote) list(ctx context.Context) error {
	var ds []api.Deployment
	if err := r.call(ctx, http.MethodGet, "/deployments", nil, &ds); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAMESPACE\tNAME\tSTATE\tUPDATED")
	for _, d := range ds {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.Namespace, d.Name, d.State, d.UpdatedAt.Format(time.RFC3339))
	}
	return w.Flush()
}

func (r *remote) builds(ctx context.Context, id string) error {
	var bs []api.Build
	if err := r.call(ctx, http.MethodGet, "/deployments/"+url.PathEscape(id)+"/builds", nil, &bs); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tOPERATION\tSTATE\tCREATED\tFINISHED\tREASON")
	for _, b := range bs {
		finished := "-"
		if b.FinishedAt != nil {
			finished = b.FinishedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, b.Operation, b.State, b.CreatedAt.Format(time.RFC3339), finished, orDash(b.Reason))
	}
	return w.Flush()
}

func (r *remote) showBuild(ctx context.Context, id string) error {
	var b api.Build
	if err := r.call(ctx, http.MethodGet, "/builds/"+url.PathEscape(id), nil, &b); err != nil || r.json {
		return err
	}
	fmt.Fprintf(r.e.stdout, "build %s %s %s (deployment %s)\n", b.ID, b.Operation, b.State, b.DeploymentID)
	if b.Reason != "" {
		fmt.Fprintf(r.e.stdout, "reason: %s\n", b.Reason)
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	for _, ev := range b.Events {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", ev.Time.Format(time.RFC3339), ev.Level, orDash(ev.Step), ev.Message)
	}
	return w.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
