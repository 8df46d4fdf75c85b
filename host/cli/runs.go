package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
)

// runCommands are the commands of apps' operations: list them, run one, list the runs,
// cancel one.
func (r *remote) runCommands() []*cobra.Command {
	var input string
	run := &cobra.Command{
		Use:   "run ID APP OPERATION [--input JSON] [--wait]",
		Short: "Queue a run of an app's operation; with --wait, print its output as it comes and exit 1 if it did not succeed",
		Long: "The input is a JSON object following the operation's schema (`fedhost deployments operations ID` shows it), " +
			"given as --input '{...}', --input @FILE, or --input - for stdin: a secret input given in a file or on stdin stays off the command line.",
		Args: cobra.ExactArgs(3),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := readInput(input, c.InOrStdin())
			if err != nil {
				return err
			}
			body, _ := json.Marshal(api.RunRequest{Input: in})
			path := "/deployments/" + url.PathEscape(args[0]) + "/apps/" + url.PathEscape(args[1]) + "/operations/" + url.PathEscape(args[2])
			var run api.Run
			raw, err := r.fetch(c.Context(), http.MethodPost, path, body)
			if err != nil {
				return err
			}
			if err := decode(http.MethodPost, path, raw, &run); err != nil {
				return err
			}
			if !r.wait {
				if r.json {
					r.printRaw(raw)
				} else {
					fmt.Fprintf(r.e.stdout, "run %s %s\n", run.ID, run.State)
				}
				return nil
			}
			return r.follow(c.Context(), args[0], run.ID)
		},
	}
	run.Flags().StringVar(&input, "input", "", "the input: a JSON object, @FILE, or - for stdin")
	run.Flags().BoolVar(&r.wait, "wait", false, "follow the run's output until it ends; exit 1 if it did not succeed")
	var cronLine, schedInput string
	schedule := &cobra.Command{
		Use:   "schedule ID APP OPERATION --cron LINE [--input JSON]",
		Short: "Run an app's operation on a schedule: a cron line in the deployment's time zone, and an input without secrets",
		Args:  cobra.ExactArgs(3),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := readInput(schedInput, c.InOrStdin())
			if err != nil {
				return err
			}
			body, _ := json.Marshal(api.ScheduleRequest{Cron: cronLine, Input: in})
			var s api.Schedule
			path := "/deployments/" + url.PathEscape(args[0]) + "/apps/" + url.PathEscape(args[1]) + "/operations/" + url.PathEscape(args[2]) + "/schedules"
			if err := r.call(c.Context(), http.MethodPost, path, body, &s); err != nil || r.json {
				return err
			}
			fmt.Fprintf(r.e.stdout, "schedule %s: next run %s\n", s.ID, s.NextAt.Local().Format(time.DateTime))
			return nil
		},
	}
	schedule.Flags().StringVar(&cronLine, "cron", "", "five fields (minute hour day month weekday) or @hourly, @daily, @weekly (required)")
	schedule.Flags().StringVar(&schedInput, "input", "", "the input: a JSON object, @FILE, or - for stdin")
	_ = schedule.MarkFlagRequired("cron")
	return []*cobra.Command{
		run, schedule,
		{
			Use:   "schedules ID",
			Short: "List the deployment's schedules with their next run",
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				var list []api.Schedule
				if err := r.call(c.Context(), http.MethodGet, "/deployments/"+url.PathEscape(args[0])+"/schedules", nil, &list); err != nil || r.json {
					return err
				}
				w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "SCHEDULE\tAPP\tOPERATION\tCRON\tNEXT RUN\tLAST RUN")
				for _, s := range list {
					last := "-"
					if s.LastRunID != "" {
						last = s.LastRunID
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.App, s.Operation, s.Cron, s.NextAt.Local().Format(time.DateTime), last)
				}
				return w.Flush()
			},
		},
		{
			Use:   "operations ID",
			Short: "List the operations the deployment's apps offer, with their inputs",
			Args:  cobra.ExactArgs(1),
			RunE:  func(c *cobra.Command, args []string) error { return r.operations(c.Context(), args[0]) },
		},
		{
			Use:   "runs ID",
			Short: "List the last runs of a deployment's operations, newest first",
			Args:  cobra.ExactArgs(1),
			RunE:  func(c *cobra.Command, args []string) error { return r.runs(c.Context(), args[0]) },
		},
		{
			Use:   "cancel-run ID RUN_ID",
			Short: "Cancel a queued or running run: its command is killed",
			Args:  cobra.ExactArgs(2),
			RunE: func(c *cobra.Command, args []string) error {
				var run api.Run
				path := "/deployments/" + url.PathEscape(args[0]) + "/runs/" + url.PathEscape(args[1]) + "/cancel"
				if err := r.call(c.Context(), http.MethodPost, path, nil, &run); err != nil {
					return err
				}
				if !r.json {
					fmt.Fprintf(r.e.stdout, "run %s %s\n", run.ID, run.State)
				}
				return nil
			},
		},
	}
}

// readInput reads --input: JSON, @FILE or - (stdin); empty is no input.
func readInput(flag string, stdin io.Reader) (json.RawMessage, error) {
	var b []byte
	var err error
	switch {
	case flag == "":
		return nil, nil
	case flag == "-":
		b, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	case strings.HasPrefix(flag, "@"):
		b, err = os.ReadFile(flag[1:])
	default:
		b = []byte(flag)
	}
	if err != nil {
		return nil, fmt.Errorf("--input: %w", err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("--input is not a JSON object (%v): give '{\"name\": value, ...}'", err)
	}
	return json.RawMessage(b), nil
}

func (r *remote) operations(ctx context.Context, id string) error {
	var ops []api.AppOperation
	if err := r.call(ctx, http.MethodGet, "/deployments/"+url.PathEscape(id)+"/operations", nil, &ops); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "APP\tOPERATION\tINPUT\tDESCRIPTION")
	for _, op := range ops {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", op.App, op.Name, inputNames(op.Input), op.Description)
	}
	return w.Flush()
}

// inputNames lists an input schema's properties, required ones first, secrets marked.
func inputNames(schema json.RawMessage) string {
	var doc struct {
		Properties map[string]struct {
			WriteOnly bool `json:"writeOnly"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &doc) != nil || len(doc.Properties) == 0 {
		return "-"
	}
	var names []string
	for _, name := range sortedKeys(doc.Properties) {
		n := name
		if doc.Properties[name].WriteOnly {
			n += " (secret)"
		}
		required := false
		for _, r := range doc.Required {
			required = required || r == name
		}
		if !required {
			n += "?"
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

func (r *remote) runs(ctx context.Context, id string) error {
	var runs []api.Run
	if err := r.call(ctx, http.MethodGet, "/deployments/"+url.PathEscape(id)+"/runs", nil, &runs); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tAPP\tOPERATION\tSTATE\tBY\tCREATED\tDURATION\tOUTPUT")
	for _, run := range runs {
		duration := "-"
		if run.DurationMS != nil {
			duration = (time.Duration(*run.DurationMS) * time.Millisecond).String()
		}
		output := fmt.Sprintf("%d bytes", run.OutputBytes)
		switch {
		case run.Sensitive:
			output = "sensitive, not kept"
		case run.OutputTruncated:
			output += " (cut)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", run.ID, run.App, run.Operation, run.State, run.Actor,
			run.CreatedAt.Local().Format(time.DateTime), duration, output)
	}
	return w.Flush()
}

// follow prints a run's output from its event stream as it comes (the command's stdout
// on stdout, the rest on stderr), reconnecting after the last piece seen, until the run
// ends; a run that did not succeed is an error.
func (r *remote) follow(ctx context.Context, deploymentID, runID string) error {
	base, err := r.baseURL()
	if err != nil {
		return err
	}
	token := r.token
	if token == "" {
		token = os.Getenv(tokenEnv)
	}
	stream := &http.Client{} // no timeout: a run may take its whole timeout
	after := 0
	for attempt := 0; ; attempt++ {
		path := fmt.Sprintf("/deployments/%s/runs/%s/events?after=%d", url.PathEscape(deploymentID), url.PathEscape(runID), after)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := stream.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			_, err = r.fetch(ctx, http.MethodGet, "/deployments/"+url.PathEscape(deploymentID)+"/runs/"+url.PathEscape(runID), nil)
			if err == nil {
				err = fmt.Errorf("following run %s: the API answered %s", runID, resp.Status)
			}
			return err
		}
		if err == nil {
			var end *api.Run
			end, after, err = r.readRunEvents(resp.Body, after)
			resp.Body.Close()
			if end != nil {
				return r.ended(*end)
			}
		}
		if ctx.Err() != nil || attempt >= 5 {
			return fmt.Errorf("stopped following run %s, which goes on (%v): `fedhost deployments runs %s` shows it", runID, err, deploymentID)
		}
		time.Sleep(time.Second)
	}
}

// readRunEvents prints the output events of one stream and returns the run of its end
// event, if it came, and the last seq seen.
func (r *remote) readRunEvents(body io.Reader, after int) (*api.Run, int, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			// The seq only goes forward: a reconnect resumes after the last piece printed.
			if n, err := strconv.Atoi(strings.TrimPrefix(line, "id: ")); err == nil && n > after {
				after = n
			}
		case line == "" && event != "":
			switch event {
			case "output":
				var o api.OutputEvent
				if json.Unmarshal([]byte(data), &o) == nil {
					if o.Stream == "stdout" {
						io.WriteString(r.e.stdout, o.Data)
					} else if o.Stream == "stderr" {
						io.WriteString(r.e.stderr, o.Data)
					} else {
						fmt.Fprintf(r.e.stderr, "fedhost: %s\n", o.Data)
					}
				}
			case "end":
				var run api.Run
				if err := json.Unmarshal([]byte(data), &run); err != nil {
					return nil, after, err
				}
				return &run, after, nil
			}
			event, data = "", ""
		}
	}
	return nil, after, sc.Err()
}

func (r *remote) ended(run api.Run) error {
	if r.json {
		b, _ := json.Marshal(run)
		r.printRaw(b)
	}
	if run.State == "succeeded" {
		return nil
	}
	return fmt.Errorf("run %s %s: %s", run.ID, run.State, run.Reason)
}
