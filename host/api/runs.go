package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/app"
)

// AppOperation is an operation an app of a deployment offers.
type AppOperation struct {
	App         string `json:"app"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	// Input is the input's JSON Schema; writeOnly properties are secrets.
	Input          json.RawMessage `json:"input,omitempty"`
	Sensitive      bool            `json:"sensitive"`
	OutputFile     string          `json:"output_file,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Idempotent     bool            `json:"idempotent"`
	NeedsRunning   bool            `json:"needs_running"`
	Concurrent     bool            `json:"concurrent"`
}

// Run is one run of an app's operation as the API shows it.
type Run struct {
	ID        string `json:"id"`
	App       string `json:"app"`
	Operation string `json:"operation"`
	Node      string `json:"node,omitempty"`
	Actor     string `json:"actor"`
	Trigger   string `json:"trigger"`
	// Input is the input sent, its secret values replaced by "(secret, not kept)".
	Input      json.RawMessage `json:"input"`
	State      string          `json:"state"`
	Reason     string          `json:"reason,omitempty"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	Sensitive  bool            `json:"sensitive"`
	OutputFile string          `json:"output_file,omitempty"`
	// OutputBytes is how much output is kept; OutputTruncated says the rest was cut.
	OutputBytes     int64      `json:"output_bytes"`
	OutputTruncated bool       `json:"output_truncated"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	// DurationMS is how long the command ran, once it ended.
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

func toRun(r store.Run) Run {
	out := Run{
		ID: r.ID, App: r.App, Operation: r.Operation, Node: r.Node, Actor: r.Actor, Trigger: r.Trigger,
		Input: json.RawMessage(orEmptyObject(r.Input)), State: string(r.State), Reason: r.Reason, ExitCode: r.ExitCode,
		Sensitive: r.Sensitive, OutputFile: r.OutputFile, OutputBytes: r.OutputBytes, OutputTruncated: r.OutputTruncated,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
	}
	if r.StartedAt != nil && r.FinishedAt != nil {
		ms := r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
		out.DurationMS = &ms
	}
	return out
}

func orEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

func toOperation(op deploy.AppOperation) AppOperation {
	timeout := op.TimeoutSeconds
	if timeout <= 0 {
		timeout = app.DefaultOperationTimeout
	}
	return AppOperation{
		App: op.App, Name: op.Name, Title: op.Title, Description: op.Description, Input: op.Input,
		Sensitive: op.Sensitive, OutputFile: op.OutputFile, TimeoutSeconds: timeout,
		Idempotent: op.Idempotent, NeedsRunning: op.NeedsRunning, Concurrent: op.Concurrent,
	}
}

func (h *handlers) listOperations(c *fiber.Ctx) error {
	ops, err := h.d.Engine.Operations(c.UserContext(), c.Params("id"))
	if err != nil {
		return err
	}
	out := make([]AppOperation, 0, len(ops))
	for _, op := range ops {
		out = append(out, toOperation(op))
	}
	return c.JSON(out)
}

// RunRequest asks for a run of an operation.
type RunRequest struct {
	Input json.RawMessage `json:"input"`
}

func (h *handlers) startRun(c *fiber.Ctx) error {
	var req RunRequest
	if len(c.Body()) > 0 {
		if err := json.Unmarshal(c.Body(), &req); err != nil {
			return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: `send {"input": {...}}, the input following the operation's schema`}
		}
	}
	cl, _ := callerOf(c)
	r, err := h.d.Engine.StartRun(c.UserContext(), c.Params("id"), deploy.RunRequest{
		App: c.Params("app"), Operation: c.Params("name"), Input: req.Input, Actor: cl.user.Name, Trigger: store.RunManual,
	})
	if err != nil {
		return err
	}
	c.Locals("subject", r.ID)
	return c.Status(fiber.StatusAccepted).JSON(toRun(r))
}

func (h *handlers) listRuns(c *fiber.Ctx) error {
	limit, err := queryInt(c, "limit", store.RunsKept, 1, store.RunsKept)
	if err != nil {
		return err
	}
	if _, err := h.d.Engine.Deployment(c.UserContext(), c.Params("id")); err != nil {
		return err
	}
	runs, err := h.d.Store.ListRuns(c.UserContext(), c.Params("id"), limit)
	if err != nil {
		return err
	}
	out := make([]Run, 0, len(runs))
	for _, r := range runs {
		out = append(out, toRun(r))
	}
	return c.JSON(out)
}

// runOf is the run a route names, if it is the deployment's.
func (h *handlers) runOf(c *fiber.Ctx) (store.Run, error) {
	r, err := h.d.Store.GetRun(c.UserContext(), c.Params("run"))
	if err != nil || r.DeploymentID != c.Params("id") {
		return store.Run{}, &deploy.Error{Code: deploy.CodeNotFound, Location: "/run", Message: "the deployment has no such run: GET /api/v1/deployments/{id}/runs lists them"}
	}
	return r, nil
}

func (h *handlers) getRun(c *fiber.Ctx) error {
	r, err := h.runOf(c)
	if err != nil {
		return err
	}
	return c.JSON(toRun(r))
}

func (h *handlers) cancelRun(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	c.Locals("subject", c.Params("run"))
	r, err := h.d.Engine.CancelRun(c.UserContext(), c.Params("id"), c.Params("run"), cl.user.Name)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(toRun(r))
}

// runOutput answers a finished run's stdout as a file, named as its operation says.
func (h *handlers) runOutput(c *fiber.Ctx) error {
	r, err := h.runOf(c)
	if err != nil {
		return err
	}
	if r.Sensitive {
		return &deploy.Error{Code: deploy.CodeNotFound, Location: "/run", Message: "the run's output is sensitive: it was not kept"}
	}
	if !r.State.Finished() {
		return &deploy.Error{Code: deploy.CodeConflict, Location: "/run", Message: "the run is " + string(r.State) + ": its output is ready when it ends; GET .../events follows it"}
	}
	var b strings.Builder
	for after := 0; ; {
		out, err := h.d.Store.RunOutputs(c.UserContext(), r.ID, after, 500)
		if err != nil {
			return err
		}
		for _, o := range out {
			if o.Stream == "stdout" {
				b.WriteString(o.Data)
			}
			after = o.Seq
		}
		if len(out) < 500 {
			break
		}
	}
	name := r.OutputFile
	if name == "" {
		name = r.App + "-" + r.Operation + ".txt"
	}
	typ := mime.TypeByExtension(filepath.Ext(name))
	if filepath.Ext(name) == ".opml" {
		typ = "text/x-opml+xml"
	}
	if typ == "" {
		typ = "text/plain; charset=utf-8"
	}
	c.Set(fiber.HeaderContentType, typ)
	c.Set(fiber.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	return c.SendString(b.String())
}

// OutputEvent is the data of one "output" event of a run's stream.
type OutputEvent struct {
	Seq    int       `json:"seq"`
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"`
	Data   string    `json:"data"`
	State  string    `json:"state"`
}

// runEvents streams a run's output as Server-Sent Events, resumable like a build's
// (Last-Event-ID or ?after=N), and ends with an "end" event holding the run.
func (h *handlers) runEvents(c *fiber.Ctx) error {
	after, err := resumeAfter(c)
	if err != nil {
		return err
	}
	r, err := h.runOf(c)
	if err != nil {
		return err
	}
	st := h.d.Store
	return streamEvents(c, after, runEventPoll, func(ctx context.Context, w *bufio.Writer, last int) (int, bool) {
		run, err := st.GetRun(ctx, r.ID)
		if err != nil {
			return last, true
		}
		for {
			out, err := st.RunOutputs(ctx, r.ID, last, 200)
			if err != nil {
				return last, true
			}
			for _, o := range out {
				data, _ := json.Marshal(OutputEvent{Seq: o.Seq, Time: o.Time, Stream: o.Stream, Data: o.Data, State: string(run.State)})
				fmt.Fprintf(w, "id: %d\nevent: output\ndata: %s\n\n", o.Seq, data)
				last = o.Seq
			}
			if len(out) < 200 {
				break
			}
		}
		if run.State.Finished() {
			data, _ := json.Marshal(toRun(run))
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", data)
			return last, true
		}
		return last, false
	})
}

// runEventPoll is how often a stream looks for new output of a running run: live
// output wants less than a build's progress.
const runEventPoll = 100 * time.Millisecond

// Schedule is a schedule of an app's operation.
type Schedule struct {
	ID        string          `json:"id"`
	App       string          `json:"app"`
	Operation string          `json:"operation"`
	Cron      string          `json:"cron"`
	Input     json.RawMessage `json:"input"`
	Actor     string          `json:"actor"`
	// NextAt is when it next queues a run; LastAt when it last did, LastRunID that run.
	NextAt    time.Time  `json:"next_at"`
	LastAt    *time.Time `json:"last_at,omitempty"`
	LastRunID string     `json:"last_run_id,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

func toSchedule(s store.RunSchedule) Schedule {
	return Schedule{ID: s.ID, App: s.App, Operation: s.Operation, Cron: s.Cron, Input: json.RawMessage(orEmptyObject(s.Input)),
		Actor: s.Actor, NextAt: s.NextAt, LastAt: s.LastAt, LastRunID: s.LastRunID, CreatedAt: s.CreatedAt}
}

// ScheduleRequest asks for a schedule of an operation.
type ScheduleRequest struct {
	// Cron is five fields (minute hour day month weekday) or @hourly, @daily, @weekly,
	// read in the deployment's time zone.
	Cron  string          `json:"cron"`
	Input json.RawMessage `json:"input"`
}

func (h *handlers) addSchedule(c *fiber.Ctx) error {
	var req ScheduleRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: `send {"cron": "30 3 * * *", "input": {...}}`}
	}
	cl, _ := callerOf(c)
	s, err := h.d.Engine.AddSchedule(c.UserContext(), c.Params("id"), deploy.ScheduleRequest{
		App: c.Params("app"), Operation: c.Params("name"), Cron: req.Cron, Input: req.Input, Actor: cl.user.Name,
	})
	if err != nil {
		return err
	}
	c.Locals("subject", s.ID)
	return c.Status(fiber.StatusCreated).JSON(toSchedule(s))
}

func (h *handlers) listSchedules(c *fiber.Ctx) error {
	if _, err := h.d.Engine.Deployment(c.UserContext(), c.Params("id")); err != nil {
		return err
	}
	list, err := h.d.Store.RunSchedules(c.UserContext(), c.Params("id"))
	if err != nil {
		return err
	}
	out := make([]Schedule, 0, len(list))
	for _, s := range list {
		out = append(out, toSchedule(s))
	}
	return c.JSON(out)
}

func (h *handlers) deleteSchedule(c *fiber.Ctx) error {
	c.Locals("subject", c.Params("schedule"))
	err := h.d.Store.DeleteRunSchedule(c.UserContext(), c.Params("id"), c.Params("schedule"))
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
