package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
	"github.com/fedhost/fedhost/sdk/schema"
)

// maxRunInput bounds an operation's input, as stored and as sent.
const maxRunInput = 16 << 10

// secretKept is what a run's stored input holds in place of a secret value.
const secretKept = "(secret, not kept)"

// AppOperation is an operation an app offers to run as a command.
type AppOperation struct {
	App string `json:"app"`
	app.Operation
}

// Operations lists the operations of the deployment's enabled apps that run as commands
// (backup and restore, the host's own, have their own routes).
func (e *Engine) Operations(ctx context.Context, deploymentID string) ([]AppOperation, error) {
	if e.opts.Catalog == nil {
		return nil, nil // no app plugins, no operations
	}
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return nil, err
	}
	return e.OperationsOf(ctx, d)
}

// OperationsOf is Operations of a deployment read already.
func (e *Engine) OperationsOf(ctx context.Context, d store.Deployment) ([]AppOperation, error) {
	if e.opts.Catalog == nil {
		return nil, nil
	}
	cat, cfg, err := e.appsOf(ctx, d)
	if err != nil {
		return nil, err
	}
	var out []AppOperation
	for name, a := range cfg.Apps {
		if !a.Enable {
			continue
		}
		ops, err := e.commandOperations(ctx, cat, name)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			if op.Name == app.OperationSyncRoles {
				continue // the host's own, run after each change of the directory
			}
			out = append(out, AppOperation{App: name, Operation: op})
		}
	}
	slices.SortFunc(out, func(a, b AppOperation) int { return strings.Compare(a.App+"/"+a.Name, b.App+"/"+b.Name) })
	return out, nil
}

func (e *Engine) appsOf(ctx context.Context, d store.Deployment) (*catalog.Catalog, catalog.Config, error) {
	cat, err := e.catalogAt(ctx, d.CatalogRevision)
	if err != nil {
		return nil, catalog.Config{}, err
	}
	cfg, err := catalog.ParseConfig(json.RawMessage(orEmpty(d.Config)))
	return cat, cfg, err
}

func orEmpty(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

// commandOperations asks an app for its operations, without the host's own. An app
// version's operations are part of its plugin, as its schema is: the answer is kept per
// app version, so that a page of a deployment costs no call to the plugin.
func (e *Engine) commandOperations(ctx context.Context, cat *catalog.Catalog, name string) ([]app.Operation, error) {
	a, ok := cat.App(name)
	if !ok {
		return nil, refuse(CodeNotFound, "/app", "the catalog has no such app")
	}
	key := a.Name + "@" + a.Version
	e.operationsMu.Lock()
	ops, kept := e.operations[key]
	e.operationsMu.Unlock()
	if kept {
		return slices.Clone(ops), nil
	}
	c, err := a.Plugin.Client()
	if err != nil {
		return nil, err
	}
	ops, err = c.App().Operations(ctx)
	if err != nil {
		return nil, fmt.Errorf("app %s: listing its operations: %w", name, err)
	}
	ops = slices.DeleteFunc(ops, func(op app.Operation) bool {
		return op.Name == store.OperationBackup || op.Name == store.OperationRestore
	})
	e.operationsMu.Lock()
	if e.operations == nil {
		e.operations = map[string][]app.Operation{}
	}
	e.operations[key] = ops
	e.operationsMu.Unlock()
	return slices.Clone(ops), nil
}

// RunRequest asks for a run of an app's operation.
type RunRequest struct {
	App       string
	Operation string
	Input     json.RawMessage
	// Actor is who asks (a user's name, or "scheduler"); Trigger manual or scheduled.
	Actor   string
	Trigger string

	// schedule is the schedule and time a scheduled run is queued for, never a caller's.
	schedule *scheduledRun
}

// scheduledRun is the slot a scheduled run takes: its schedule, the time it is queued
// for, and the tick that queues it.
type scheduledRun struct {
	id        string
	at, ranAt time.Time
}

// StartRun validates a run's input against its operation's schema, keeps its secret
// inputs in the secret resource, and queues the run. Nothing is queued when it refuses.
func (e *Engine) StartRun(ctx context.Context, deploymentID string, req RunRequest) (store.Run, error) {
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return store.Run{}, err
	}
	if d.State == StateSuspended || d.State == StateExported || d.State == StateDestroyed {
		return store.Run{}, refuse(CodeConflict, "", "the deployment is %s: its apps run no operations; resume it first", d.State)
	}
	cat, cfg, err := e.appsOf(ctx, d)
	if err != nil {
		return store.Run{}, err
	}
	if a, ok := cfg.Apps[req.App]; !ok || !a.Enable {
		return store.Run{}, refuse(CodeNotFound, "/app", "the deployment has no enabled app of that name: GET /api/v1/deployments/{id}/operations lists its apps' operations")
	}
	ops, err := e.commandOperations(ctx, cat, req.App)
	if err != nil {
		return store.Run{}, err
	}
	i := slices.IndexFunc(ops, func(op app.Operation) bool { return op.Name == req.Operation })
	if i < 0 {
		return store.Run{}, refuse(CodeNotFound, "/operation", "app %s has no such operation: GET /api/v1/deployments/{id}/operations lists them", req.App)
	}
	if ops[i].Name == app.OperationSyncRoles {
		return store.Run{}, refuse(CodeConflict, "/operation", "fedhost runs %s itself, after each change of the directory's users and groups and on a timer", app.OperationSyncRoles)
	}
	return e.queueRun(ctx, d, req, ops[i], maxRunInput)
}

// queueRun checks a run's input, at most limit bytes, keeps its secret inputs in the
// secret resource, and queues the run.
func (e *Engine) queueRun(ctx context.Context, d store.Deployment, req RunRequest, op app.Operation, limit int) (store.Run, error) {
	in, err := checkInput(op, req.Input, limit)
	if err != nil {
		return store.Run{}, err
	}
	secrets := app.SecretInputs(op.Input, in)
	kept, err := withoutSecrets(in, secrets)
	if err != nil {
		return store.Run{}, err
	}
	run := store.Run{
		DeploymentID: d.ID, App: req.App, Operation: op.Name, Exclusive: !op.Concurrent,
		Actor: req.Actor, Trigger: req.Trigger, Input: string(kept), Sensitive: op.Sensitive, OutputFile: op.OutputFile,
	}
	if len(secrets) > 0 {
		run.SecretInstance = "run-" + newRunTag()
		files := map[string]contract.SecretFile{}
		values := map[string][]byte{}
		for name, v := range secrets {
			files[secretFileName("/"+name)] = contract.SecretFile{Supplied: true}
			values[secretFileName("/"+name)] = []byte(v)
		}
		refs, err := e.keep(ctx, d.Namespace, run.SecretInstance, files, values)
		if err != nil {
			return store.Run{}, err
		}
		byInput := map[string]string{}
		for name := range secrets {
			byInput[name] = refs[secretFileName("/"+name)]
		}
		b, _ := json.Marshal(byInput)
		run.SecretRefs = string(b)
	}
	var created store.Run
	if sc := req.schedule; sc != nil {
		created, err = e.opts.Store.CreateScheduledRun(ctx, run, sc.id, sc.at, sc.ranAt)
	} else {
		created, err = e.opts.Store.CreateRun(ctx, run)
	}
	if err != nil {
		e.dropRunSecrets(d.Namespace, run.SecretInstance)
		return store.Run{}, err
	}
	run = created
	if err := e.queue.EnqueueRun(ctx, run.ID, d.NodeHost); err != nil {
		_ = e.opts.Store.FinishRun(context.WithoutCancel(ctx), run.ID, store.RunEnd{State: store.RunFailed, Reason: "could not be queued"})
		e.dropRunSecrets(d.Namespace, run.SecretInstance)
		return store.Run{}, err
	}
	return e.opts.Store.GetRun(ctx, run.ID)
}

// newRunTag is a short unique tag for a run's secret instance: the random end of a UUID.
func newRunTag() string {
	id := uuid.NewString()
	return id[len(id)-12:]
}

// checkInput validates an input against an operation's schema; the problems name the
// input's fields (/input/...), never a value.
func checkInput(op app.Operation, raw json.RawMessage, limit int) (json.RawMessage, error) {
	if len(raw) > limit {
		return nil, refuse(CodeInvalidConfiguration, "/input", "the input is larger than %d bytes", limit)
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	if len(op.Input) == 0 {
		if string(raw) != "{}" {
			return nil, refuse(CodeInvalidConfiguration, "/input", "operation %s takes no input: send {} or none", op.Name)
		}
		return raw, nil
	}
	s, err := schema.Compile("operation.json", op.Input)
	if err != nil {
		return nil, fmt.Errorf("the input schema of operation %s does not compile: %w", op.Name, err)
	}
	if problems := schema.Check(s, raw); len(problems) > 0 {
		for i := range problems {
			problems[i].Location = "/input" + problems[i].Location
		}
		return nil, invalid(problems)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, refuse(CodeInvalidConfiguration, "/input", "the input is not JSON")
	}
	return json.Marshal(schema.ApplyDefaults(s, doc))
}

// withoutSecrets is the input with each secret value replaced by a mention.
func withoutSecrets(in json.RawMessage, secrets map[string]string) (json.RawMessage, error) {
	if len(secrets) == 0 {
		return in, nil
	}
	var doc map[string]any
	if err := json.Unmarshal(in, &doc); err != nil {
		return nil, err
	}
	for name := range secrets {
		doc[name] = secretKept
	}
	return json.Marshal(doc)
}

// dropRunSecrets removes a run's secret instance, once the run no longer needs it.
func (e *Engine) dropRunSecrets(tenant, instance string) {
	if instance == "" {
		return
	}
	c, _, err := e.route(contract.Secret)
	if err == nil {
		err = c.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: instance, Type: contract.Secret})
	}
	if err != nil {
		e.log.Error("removing the secret inputs of a run", "instance", instance, "error", err)
	}
}

// CancelRun cancels a queued or running run of a deployment.
func (e *Engine) CancelRun(ctx context.Context, deploymentID, runID, actor string) (store.Run, error) {
	r, err := e.opts.Store.GetRun(ctx, runID)
	if err != nil || r.DeploymentID != deploymentID {
		return store.Run{}, refuse(CodeNotFound, "/run", "the deployment has no such run")
	}
	if err := e.queue.CancelRun(ctx, runID, actor); err != nil {
		if errors.Is(err, store.ErrBuildFinished) {
			return store.Run{}, refuse(CodeConflict, "/run", "the run is already %s", r.State)
		}
		return store.Run{}, err
	}
	return e.opts.Store.GetRun(ctx, runID)
}

// RunOperation runs a queued run: the app renders its command, the node's instance
// provider runs it, and its output and end are recorded. It returns an error wrapping
// store.ErrNodeBusy, and records nothing, while another run holds the node.
func (e *Engine) RunOperation(ctx context.Context, runID string, jobID int64) error {
	r, err := e.opts.Store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if r.State.Finished() {
		return nil
	}
	bg := context.WithoutCancel(ctx)
	rec := &runRecorder{e: e, run: r, ctx: bg}
	if r.State == store.RunRunning {
		// Its process stopped while the run ran: the command is gone with the exec call.
		return rec.finish(store.RunEnd{State: store.RunFailed, Reason: "lost: fedhost stopped while the run ran; run it again"}, nil)
	}
	d, err := e.Deployment(ctx, r.DeploymentID)
	if err != nil {
		return rec.finish(store.RunEnd{State: store.RunFailed, Reason: err.Error()}, nil)
	}
	rec.tenant = d.Namespace
	plan, err := e.prepareRun(ctx, d, r)
	if err != nil {
		return rec.finish(store.RunEnd{State: store.RunFailed, Reason: err.Error()}, nil)
	}
	if err := e.opts.Store.StartRun(ctx, r.ID, plan.cmd.Node, jobID); err != nil {
		if errors.Is(err, store.ErrBuildFinished) {
			return nil // canceled while it waited
		}
		return err
	}
	rec.secrets = plan.secrets
	rec.note("run started by %s: %s %s in node %s", r.Actor, r.App, r.Operation, plan.cmd.Node)
	timeout := time.Duration(plan.op.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = app.DefaultOperationTimeout * time.Second
	}
	res, err := plan.client.Exec(ctx, resource.ExecRequest{
		Tenant: d.Namespace, Instance: plan.node.Name, Type: contract.Instance, Spec: json.RawMessage(plan.node.Spec),
		Binary: plan.cmd.Binary, Args: plan.cmd.Args, Env: plan.cmd.Env, Stdin: plan.cmd.Stdin, TTY: plan.cmd.TTY, Timeout: timeout,
	}, rec.output)
	end := store.RunEnd{ExitCode: &res.ExitCode, Reason: res.Status}
	switch {
	case errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely):
		end = store.RunEnd{State: store.RunCanceled, Reason: "canceled: the command was killed"}
	case ctx.Err() != nil:
		end = store.RunEnd{State: store.RunFailed, Reason: "fedhost stopped while the run ran: the command was killed; run it again"}
	case err != nil:
		end = store.RunEnd{State: store.RunFailed, Reason: scrubSecrets(err.Error(), plan.secrets)}
	case res.TimedOut:
		end.State = store.RunTimedOut
	case res.ExitCode == 0:
		end.State = store.RunSucceeded
	default:
		end.State = store.RunFailed
	}
	return rec.finish(end, plan)
}

// runPlan is what a run needs to start: its operation, command and node.
type runPlan struct {
	op      app.Operation
	cmd     app.Command
	node    store.Resource
	client  *resource.Client
	secrets map[string]string
}

func (e *Engine) prepareRun(ctx context.Context, d store.Deployment, r store.Run) (*runPlan, error) {
	if d.State == StateSuspended || d.State == StateExported || d.State == StateDestroyed {
		return nil, fmt.Errorf("the deployment is %s", d.State)
	}
	cat, cfg, err := e.appsOf(ctx, d)
	if err != nil {
		return nil, err
	}
	ops, err := e.commandOperations(ctx, cat, r.App)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(ops, func(op app.Operation) bool { return op.Name == r.Operation })
	if i < 0 {
		return nil, fmt.Errorf("app %s no longer offers operation %s", r.App, r.Operation)
	}
	p := &runPlan{op: ops[i], secrets: map[string]string{}}
	input, err := e.revealInput(ctx, d, r, p.secrets)
	if err != nil {
		return nil, err
	}
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	results := map[string]json.RawMessage{}
	for _, row := range rows {
		if row.App == r.App && row.Result != "" {
			results[strings.TrimPrefix(row.Name, r.App+"-")] = json.RawMessage(row.Result)
		}
	}
	a, _ := cat.App(r.App)
	c, err := a.Plugin.Client()
	if err != nil {
		return nil, err
	}
	p.cmd, err = c.App().Command(ctx, app.CommandRequest{
		Operation: r.Operation, Input: input, Tenant: d.Namespace, Domain: d.Domain,
		Config: placeholderOptions(cfg.Apps[r.App].OptionsOrEmpty(), r.App, e.storedRefs(d)), Results: results,
	})
	if err != nil {
		return nil, fmt.Errorf("app %s: rendering the command of %s: %s", r.App, r.Operation, scrubSecrets(err.Error(), p.secrets))
	}
	name := r.App + "-" + p.cmd.Node
	j := slices.IndexFunc(rows, func(row store.Resource) bool { return row.Name == name && row.Type == contract.Instance })
	if j < 0 {
		return nil, fmt.Errorf("app %s has no node %s: deploy the deployment first", r.App, p.cmd.Node)
	}
	p.node = rows[j]
	if p.op.NeedsRunning && (p.node.State != store.ResourceProvisioned || d.State != StateActive) {
		return nil, fmt.Errorf("operation %s needs app %s running, and its node %s is %s in a deployment that is %s", r.Operation, r.App, p.cmd.Node, p.node.State, d.State)
	}
	pl, ok := e.opts.Plugins.Find(sdk.KindResource, p.node.Provider, "")
	if !ok {
		return nil, fmt.Errorf("node %s runs on instance provider %s, which is not installed", name, p.node.Provider)
	}
	pc, err := pl.Client()
	if err != nil {
		return nil, err
	}
	p.client = pc.Resource()
	return p, nil
}

// revealInput is the run's input with its secret values back in, which it adds to
// secrets by input name.
func (e *Engine) revealInput(ctx context.Context, d store.Deployment, r store.Run, secrets map[string]string) (json.RawMessage, error) {
	if r.SecretRefs == "" {
		return json.RawMessage(r.Input), nil
	}
	var refs map[string]string
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.SecretRefs), &refs); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(r.Input), &doc); err != nil {
		return nil, err
	}
	for name, ref := range refs {
		v, err := e.reveal(ctx, d.Namespace, r.SecretInstance, ref)
		if err != nil {
			return nil, err
		}
		doc[name], secrets[name] = string(v), string(v)
	}
	return json.Marshal(doc)
}

// scrubSecrets replaces every secret input's value in s by a mention of its name.
func scrubSecrets(s string, secrets map[string]string) string {
	for name, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[secret input "+name+"]")
		}
	}
	return s
}

// runRecorder keeps a run's output: at most store.RunOutputMax bytes, none for a
// sensitive run, each piece with the secret inputs' values taken out.
type runRecorder struct {
	e         *Engine
	run       store.Run
	ctx       context.Context
	tenant    string
	secrets   map[string]string
	seq       int
	bytes     int64
	truncated bool
}

func (rec *runRecorder) append(stream, data string) {
	rec.seq++
	o := store.RunOutput{RunID: rec.run.ID, Seq: rec.seq, Stream: stream, Data: data}
	if err := rec.e.opts.Store.AppendRunOutput(rec.ctx, o); err != nil {
		rec.e.log.Error("recording a run's output", "run_id", rec.run.ID, "error", err)
	}
}

// note records what the host says about the run.
func (rec *runRecorder) note(format string, args ...any) {
	rec.append("fedhost", fmt.Sprintf(format, args...))
}

func (rec *runRecorder) output(o resource.ExecOutput) error {
	if rec.run.Sensitive || rec.truncated {
		return nil
	}
	data := scrubSecrets(strings.ToValidUTF8(string(o.Data), "\uFFFD"), rec.secrets)
	if rest := store.RunOutputMax - rec.bytes; int64(len(data)) > rest {
		data = cutUTF8(data, int(rest))
		rec.truncated = true
	}
	rec.bytes += int64(len(data))
	if data != "" {
		rec.append(o.Stream, data)
	}
	if rec.truncated {
		rec.note("output cut at %d bytes: the rest was not kept", store.RunOutputMax)
	}
	return nil
}

func cutUTF8(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// finish drops the run's secret inputs, records an audit event and the run's end, and
// prunes old runs.
func (rec *runRecorder) finish(end store.RunEnd, plan *runPlan) error {
	e, r := rec.e, rec.run
	if plan != nil && r.Sensitive {
		rec.note("sensitive output: not kept")
	}
	end.OutputBytes, end.OutputTruncated = rec.bytes, rec.truncated
	end.Reason = cut(end.Reason, 1024)
	tenant := rec.tenant
	if tenant == "" {
		if d, derr := e.opts.Store.GetDeployment(rec.ctx, r.DeploymentID); derr == nil {
			tenant = d.Namespace
		}
	}
	if tenant != "" {
		e.dropRunSecrets(tenant, r.SecretInstance)
	}
	if e.opts.Audit != nil {
		result := audit.ResultOK
		if end.State != store.RunSucceeded {
			result = audit.ResultError
		}
		issuer := audit.IssuerSystem
		if r.Trigger == store.RunScheduled {
			issuer = audit.IssuerScheduler
		}
		if aerr := e.opts.Audit.Record(rec.ctx, audit.Event{
			Actor: "runs", Issuer: issuer, Action: "deployment.run.end", DeploymentID: r.DeploymentID, Subject: r.ID,
			Result: result, Reason: r.App + " " + r.Operation + ": " + string(end.State),
		}); aerr != nil {
			e.log.Error("recording the end of a run", "run_id", r.ID, "error", aerr)
		}
	}
	// The end is recorded last, with its last line and the pruning of old runs, in one
	// transaction: a run seen finished has its audit event.
	rec.seq++
	retention := e.runRetentionStart()
	end.Last = &store.RunOutput{Seq: rec.seq, Stream: "fedhost", Data: fmt.Sprintf("run %s: %s", end.State, end.Reason)}
	end.PruneBefore = &retention
	err := e.opts.Store.FinishRun(rec.ctx, r.ID, end)
	if errors.Is(err, store.ErrBuildFinished) {
		err = nil
	}
	return err
}

// runRetentionStart is the time before which finished runs go: log_retention_days.
func (e *Engine) runRetentionStart() time.Time {
	if e.opts.BuildLogRetention <= 0 {
		return time.Time{}
	}
	return e.now().Add(-e.opts.BuildLogRetention)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n)
}
