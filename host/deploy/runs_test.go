package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/storetest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// runsBundle is an engine whose queue works runs, with the real local and embedded
// providers and the test app opsapp, whose node runs.
type runsBundle struct {
	e     *Engine
	st    *store.Store
	d     store.Deployment
	clock *storetest.Clock
}

func goBuild(t *testing.T, out, pkg string) {
	t.Helper()
	b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, b)
}

func setupRuns(t *testing.T) *runsBundle {
	t.Helper()
	return setupRunsOn(t, store.Config{Database: "sqlite", DataDir: t.TempDir()}, "")
}

// setupRunsOn is setupRuns on the database of cfg, its queue's River client named
// clientID (cluster mode on PostgreSQL when set).
func setupRunsOn(t *testing.T, cfg store.Config, clientID string) *runsBundle {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	pluginDir, artifacts := filepath.Join(dir, "plugins"), filepath.Join(dir, "artifacts")
	lock := plugins.Lock{}
	for name, pkg := range map[string]string{
		"fedhost-app-opsapp": "./testdata/opsapp", "fedhost-resource-local": "../../plugins/resources/local",
		"fedhost-resource-embedded": "../../plugins/resources/embedded",
	} {
		bin := filepath.Join(pluginDir, name)
		goBuild(t, bin, pkg)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(pluginDir))
	goBuild(t, filepath.Join(artifacts, "httpserver"), "../../plugins/resources/local/testdata/httpserver")
	sh, err := os.ReadFile("/bin/sh")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifacts, "sh"), sh, 0o755))

	st, err := store.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: pluginDir, DataDir: filepath.Join(dir, "data"), Logger: hclog.NewNullLogger(),
		Settings: func(desc sdk.Description) (json.RawMessage, bool) {
			if desc.Name == "local" {
				return json.RawMessage(fmt.Sprintf(`{"artifacts_dir": %q}`, artifacts)), true
			}
			return nil, true
		}})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	clock := storetest.NewClock(time.Now())
	e := New(Options{Store: st, Plugins: m, Catalog: cat, Audit: audit.New(st, audit.Options{}), Clock: clock.Now, Environment: []config.Resource{
		{Type: contract.Instance, Provider: "local"}, {Type: contract.Secret, Provider: "embedded"},
	}})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil }), Runner: e, ClientID: clientID})
	require.NoError(t, err)
	e.SetQueue(q)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })

	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", State: StateActive, Config: `{"apps":{"opsapp":{"enable":true}}}`})
	require.NoError(t, err)
	a, _ := cat.App("opsapp")
	c, err := a.Plugin.Client()
	require.NoError(t, err)
	nodes, err := c.App().Render(ctx, app.RenderRequest{Tenant: d.Namespace, Config: json.RawMessage(`{}`)})
	require.NoError(t, err)
	local, provider, err := e.route(contract.Instance)
	require.NoError(t, err)
	res, err := local.Provision(ctx, resource.Request{Tenant: d.Namespace, Instance: "opsapp-web", Type: contract.Instance, Spec: nodes[0].Spec})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = local.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: d.Namespace, Instance: "opsapp-web", Type: contract.Instance})
	})
	require.NoError(t, st.PutResource(ctx, store.Resource{DeploymentID: d.ID, Name: "opsapp-web", App: "opsapp", Type: contract.Instance,
		Provider: provider, Spec: string(nodes[0].Spec), Result: string(res.Data), State: store.ResourceProvisioned}))
	return &runsBundle{e: e, st: st, d: d, clock: clock}
}

func (b *runsBundle) start(t *testing.T, operation, input string) store.Run {
	t.Helper()
	r, err := b.e.StartRun(context.Background(), b.d.ID, RunRequest{App: "opsapp", Operation: operation, Input: json.RawMessage(input), Actor: "alice", Trigger: store.RunManual})
	require.NoError(t, err)
	return r
}

// wait waits for the run to reach a state that cond accepts.
func (b *runsBundle) wait(t *testing.T, id string, cond func(store.Run) bool) store.Run {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		r, err := b.st.GetRun(context.Background(), id)
		require.NoError(t, err)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s %s is %s: %s", r.Operation, id, r.State, r.Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func finished(r store.Run) bool { return r.State.Finished() }

func (b *runsBundle) output(t *testing.T, id, stream string) string {
	t.Helper()
	out, err := b.st.RunOutputs(context.Background(), id, 0, 10000)
	require.NoError(t, err)
	var s strings.Builder
	for _, o := range out {
		if stream == "" || o.Stream == stream {
			s.WriteString(o.Data)
		}
	}
	return s.String()
}

// gone reports whether pid has ended (a zombie has).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0] == "Z" || f[0] == "X"
}

func (b *runsBundle) childOf(t *testing.T, id string) int {
	t.Helper()
	var pid int
	b.wait(t, id, func(store.Run) bool {
		line, _, _ := strings.Cut(b.output(t, id, "stdout"), "\n")
		var err error
		pid, err = strconv.Atoi(line)
		return err == nil
	})
	return pid
}

func TestRunsOfAnAppsOperations(t *testing.T) {
	b := setupRuns(t)
	ctx := context.Background()

	t.Run("a run keeps its output and none of its secret", func(t *testing.T) {
		const secret = "hunter2-very-secret"
		r := b.start(t, "echo", `{"message": "hello", "secret": "`+secret+`", "times": 2}`)
		require.JSONEq(t, `{"message": "hello", "secret": "(secret, not kept)", "times": 2}`, r.Input)
		require.NotEmpty(t, r.SecretInstance)
		r = b.wait(t, r.ID, finished)
		require.Equal(t, store.RunSucceeded, r.State, r.Reason)
		require.Equal(t, 0, *r.ExitCode)
		require.Equal(t, "web", r.Node)
		require.Equal(t, "message=hello\nmessage=hello\nthe secret is [secret input secret]\n", b.output(t, r.ID, "stdout"))
		require.Equal(t, "secret on stderr: [secret input secret]\n", b.output(t, r.ID, "stderr"))
		require.Empty(t, r.SecretRefs, "the secret's reference goes with the run's end")

		row, err := json.Marshal(r)
		require.NoError(t, err)
		require.NotContains(t, string(row), secret)
		require.NotContains(t, b.output(t, r.ID, ""), secret)
		events, err := b.st.AuditEvents(ctx, 0, 1000)
		require.NoError(t, err)
		all, err := json.Marshal(events)
		require.NoError(t, err)
		require.NotContains(t, string(all), secret)
		require.Contains(t, string(all), "opsapp echo: succeeded", "the run's end is an audit event")

	})

	t.Run("a run past its timeout is killed with its children and marked timed out", func(t *testing.T) {
		r := b.start(t, "sleep", "")
		child := b.childOf(t, r.ID)
		r = b.wait(t, r.ID, finished)
		require.Equal(t, store.RunTimedOut, r.State, r.Reason)
		require.Contains(t, r.Reason, "timed out after 1s")
		require.Less(t, r.FinishedAt.Sub(*r.StartedAt), 10*time.Second)
		require.Eventually(t, func() bool { return gone(child) }, 5*time.Second, 50*time.Millisecond, "no process of the run is left")
	})

	t.Run("a canceled run is killed with its children, and a run waits for the node", func(t *testing.T) {
		waiting := b.start(t, "wait", "")
		child := b.childOf(t, waiting.ID)
		next := b.start(t, "echo", `{"message": "after", "secret": "another-secret"}`)
		time.Sleep(time.Second)
		got, err := b.st.GetRun(ctx, next.ID)
		require.NoError(t, err)
		require.Equal(t, store.RunQueued, got.State, "one run at a time in the node")

		_, err = b.e.CancelRun(ctx, b.d.ID, waiting.ID, "alice")
		require.NoError(t, err)
		waiting = b.wait(t, waiting.ID, finished)
		require.Equal(t, store.RunCanceled, waiting.State, waiting.Reason)
		require.Eventually(t, func() bool { return gone(child) }, 5*time.Second, 50*time.Millisecond, "no process of the run is left")

		next = b.wait(t, next.ID, finished)
		require.Equal(t, store.RunSucceeded, next.State, next.Reason)
		require.True(t, next.StartedAt.After(*waiting.FinishedAt) || next.StartedAt.Equal(*waiting.FinishedAt))
	})

	t.Run("a sensitive run keeps no output", func(t *testing.T) {
		r := b.wait(t, b.start(t, "token", "").ID, finished)
		require.Equal(t, store.RunSucceeded, r.State, r.Reason)
		require.Zero(t, r.OutputBytes)
		require.Empty(t, b.output(t, r.ID, "stdout"))
		require.NotContains(t, b.output(t, r.ID, ""), "node-token")
		require.Contains(t, b.output(t, r.ID, "fedhost"), "sensitive output: not kept")
	})

	t.Run("a run keeps at most 1 MiB of output, and says it cut the rest", func(t *testing.T) {
		r := b.wait(t, b.start(t, "flood", "").ID, finished)
		require.Equal(t, store.RunSucceeded, r.State, r.Reason)
		require.True(t, r.OutputTruncated)
		require.Equal(t, int64(store.RunOutputMax), r.OutputBytes)
		require.Len(t, b.output(t, r.ID, "stdout"), store.RunOutputMax)
		require.NotContains(t, b.output(t, r.ID, "stdout"), "done")
		require.Contains(t, b.output(t, r.ID, "fedhost"), "output cut at 1048576 bytes: the rest was not kept")
	})

	t.Run("a schedule runs at its time in the deployment's zone, once after a restart, never while suspended", func(t *testing.T) {
		require.NoError(t, b.st.UpdateDeployment(ctx, b.d.ID, map[string]any{"time_zone": "Europe/Paris"}))
		at := func(s string) time.Time {
			v, err := time.Parse(time.RFC3339, s)
			require.NoError(t, err)
			return v
		}
		b.clock.Add(at("2026-03-02T08:00:00Z").Sub(b.clock.Now())) // 09:00 in Paris
		_, err := b.e.AddSchedule(ctx, b.d.ID, ScheduleRequest{App: "opsapp", Operation: "echo", Cron: "30 9 * * *", Input: []byte(`{"message": "m", "secret": "a-secret-value"}`)})
		require.Equal(t, "/input/secret", err.(*Error).Location, "a schedule keeps no secret")
		_, err = b.e.AddSchedule(ctx, b.d.ID, ScheduleRequest{App: "opsapp", Operation: "token", Cron: "every day"})
		require.Equal(t, "/cron", err.(*Error).Location)
		sc, err := b.e.AddSchedule(ctx, b.d.ID, ScheduleRequest{App: "opsapp", Operation: "token", Cron: "30 9 * * *", Actor: "alice"})
		require.NoError(t, err)
		require.True(t, at("2026-03-02T08:30:00Z").Equal(sc.NextAt), "09:30 in Paris is 08:30 UTC: %s", sc.NextAt)

		scheduled := func() []store.Run {
			runs, err := b.st.ListRuns(ctx, b.d.ID, 100)
			require.NoError(t, err)
			return slices.DeleteFunc(runs, func(r store.Run) bool { return r.Trigger != store.RunScheduled })
		}
		require.NoError(t, b.e.Tick(ctx, at("2026-03-02T08:29:00Z")))
		require.Empty(t, scheduled(), "not before its time")
		require.NoError(t, b.e.Tick(ctx, at("2026-03-02T08:31:00Z")))
		runs := scheduled()
		require.Len(t, runs, 1, "at its time")
		require.Equal(t, "scheduler", runs[0].Actor)
		require.Equal(t, store.RunSucceeded, b.wait(t, runs[0].ID, finished).State)
		require.NoError(t, b.e.Tick(ctx, at("2026-03-02T08:32:00Z")))
		require.Len(t, scheduled(), 1, "once")

		// A new engine on the same store, three days later: the missed runs run once.
		restarted := New(b.e.opts)
		restarted.SetQueue(b.e.queue)
		n, err := restarted.runSchedules(ctx, at("2026-03-05T12:00:00Z"))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		list, err := b.st.RunSchedules(ctx, b.d.ID)
		require.NoError(t, err)
		require.True(t, at("2026-03-06T08:30:00Z").Equal(list[0].NextAt), "next: %s", list[0].NextAt)
		require.Equal(t, scheduled()[0].ID, list[0].LastRunID)

		require.NoError(t, b.st.UpdateDeployment(ctx, b.d.ID, map[string]any{"state": StateSuspended}))
		n, err = restarted.runSchedules(ctx, at("2026-03-06T09:00:00Z"))
		require.NoError(t, err)
		require.Zero(t, n, "a suspended deployment's schedule does not run")
		require.Len(t, scheduled(), 2)
		list, err = b.st.RunSchedules(ctx, b.d.ID)
		require.NoError(t, err)
		require.True(t, at("2026-03-07T08:30:00Z").Equal(list[0].NextAt), "and moves on: %s", list[0].NextAt)
		require.NoError(t, b.st.UpdateDeployment(ctx, b.d.ID, map[string]any{"state": StateActive}))
	})
}
