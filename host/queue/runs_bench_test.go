package queue

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
)

// BenchmarkRunQueueOverhead measures what the queue adds to a run of an operation, on
// both databases: from the submit (the run stored and its job inserted) to the runner
// starting (of which submit-ms is storing the run and inserting its job), and from the command's end to the run recorded (its last line, the audit
// event, its end, the pruning), with River's default fetch intervals and with fedhost's.
func BenchmarkRunQueueOverhead(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, fetch := range []string{"river-defaults", "fedhost"} {
			b.Run(db+"/"+fetch, func(b *testing.B) {
				cfg := store.Config{Database: "sqlite", DataDir: b.TempDir()}
				if db == "postgres" {
					cfg = store.Config{Database: pgtest.DSN(b)}
				}
				benchRuns(b, cfg, fetch == "river-defaults")
			})
		}
	}
}

type runTimes struct{ started, ended, recorded time.Time }

func benchRuns(b *testing.B, cfg store.Config, riverDefaults bool) {
	ctx := context.Background()
	st, err := store.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	trail := audit.New(st, audit.Options{})
	d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "bench", Config: "{}"})
	if err != nil {
		b.Fatal(err)
	}
	times := make(chan runTimes, 1)
	runner := RunnerFunc(func(ctx context.Context, id string, jobID int64) error {
		var t runTimes
		t.started = time.Now()
		if err := st.StartRun(ctx, id, "web", jobID); err != nil {
			return err
		}
		t.ended = time.Now() // the command would run here
		if err := trail.Record(ctx, audit.Event{Actor: "runs", Issuer: audit.IssuerSystem, Action: "deployment.run.end", DeploymentID: d.ID, Subject: id, Result: audit.ResultOK}); err != nil {
			return err
		}
		code, retention := 0, time.Now().Add(-30*24*time.Hour)
		if err := st.FinishRun(ctx, id, store.RunEnd{State: store.RunSucceeded, ExitCode: &code,
			Last: &store.RunOutput{Seq: 1, Stream: "fedhost", Data: "run succeeded"}, PruneBefore: &retention}); err != nil {
			return err
		}
		t.recorded = time.Now()
		times <- t
		return nil
	})
	q, err := New(st, Config{
		Builder: BuilderFunc(func(context.Context, string, func(string, string)) error { return nil }), Runner: runner,
		Logger: slog.New(slog.DiscardHandler),
		river: func(c *river.Config) {
			if riverDefaults {
				c.Queues[runsQueue] = river.QueueConfig{MaxWorkers: 4, FetchCooldown: 100 * time.Millisecond, FetchPollInterval: time.Second}
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = q.Stop(context.Background()) }()
	time.Sleep(200 * time.Millisecond) // River's producers start fetching

	var toStart, toRecord, inserting time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		submitted := time.Now()
		r, err := st.CreateRun(ctx, store.Run{DeploymentID: d.ID, App: "miniflux", Operation: "refresh-feeds", Exclusive: true, Actor: "bench", Trigger: store.RunManual, Input: "{}"})
		if err != nil {
			b.Fatal(err)
		}
		if err := q.EnqueueRun(ctx, r.ID, ""); err != nil {
			b.Fatal(err)
		}
		inserting += time.Since(submitted)
		select {
		case t := <-times:
			toStart += t.started.Sub(submitted)
			toRecord += t.recorded.Sub(t.ended)
		case <-time.After(30 * time.Second):
			b.Fatal(fmt.Sprintf("run %d did not start in 30 s", i))
		}
	}
	b.ReportMetric(float64(toStart.Microseconds())/float64(b.N)/1000, "submit-to-start-ms")
	b.ReportMetric(float64(toRecord.Microseconds())/float64(b.N)/1000, "end-to-recorded-ms")
	b.ReportMetric(float64(inserting.Microseconds())/float64(b.N)/1000, "submit-ms")
}
