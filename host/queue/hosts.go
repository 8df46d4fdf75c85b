package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fedhost/fedhost/host/store"
)

// In a cluster (PostgreSQL, ClientIDs set) each host records that it lives every
// heartbeatEvery, and the leader fails, every lostCheckEvery, the builds still running
// on a host not seen for lostAfter: a host killed in the middle of a build no longer
// leaves it running until it restarts or River's rescuer takes the job back an hour
// later. lostAfter is six heartbeats, so a host only slow to write is not taken for dead.
const (
	heartbeatEvery = 5 * time.Second
	lostAfter      = 30 * time.Second
	lostCheckEvery = "@every 10s"
	lostCheckID    = "lost-builds"
)

// clusterMode reports whether q keeps heartbeats and fails the builds of dead hosts.
func (q *Queue) clusterMode() bool { return q.store.RiverPgx() != nil && q.clientID != "" }

// heartbeat records that this host lives, now and every heartbeatEvery until ctx ends.
// The database's clock is used, so the hosts' clocks need not agree.
func (q *Queue) heartbeat(ctx context.Context) {
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		if err := q.beat(ctx); err != nil && ctx.Err() == nil {
			q.logger.Error("queue: recording this host's heartbeat", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// beat records once that this host lives.
func (q *Queue) beat(ctx context.Context) error {
	_, err := q.store.RiverPgx().Exec(ctx, `INSERT INTO fedhost_hosts (client_id, seen_at) VALUES ($1, now())
		ON CONFLICT (client_id) DO UPDATE SET seen_at = now()`, q.clientID)
	return err
}

// failDeadHosts fails the builds and runs whose jobs run on hosts not seen for lostAfter, as
// FailLost does at a host's own restart.
func (q *Queue) failDeadHosts(ctx context.Context, _ time.Time) error {
	rows, err := q.store.RiverPgx().Query(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now()
		WHERE kind IN ('build', 'run') AND state = 'running' AND attempted_by[array_upper(attempted_by, 1)] IN (
			SELECT client_id FROM fedhost_hosts WHERE seen_at < now() - make_interval(secs => $1))
		RETURNING kind, args`, lostAfter.Seconds())
	if err != nil {
		return fmt.Errorf("finding the builds of dead hosts: %w", err)
	}
	l, err := q.lostJobs(rows)
	rows.Close()
	if err != nil {
		return err
	}
	if len(l.builds)+len(l.runs) > 0 {
		q.logger.Warn("queue: builds and runs of a host not seen lately failed as lost", "builds", len(l.builds), "runs", len(l.runs))
	}
	if err := q.failStranded(ctx); err != nil {
		return err
	}
	// A host gone for a week is forgotten, so the table stays as small as the cluster.
	if _, err := q.store.RiverPgx().Exec(ctx, `DELETE FROM fedhost_hosts WHERE seen_at < now() - interval '7 days'`); err != nil {
		return fmt.Errorf("forgetting hosts gone for a week: %w", err)
	}
	if err := q.markLost(ctx, l); err != nil {
		return err
	}
	if q.lost != nil && len(l.builds) > 0 {
		q.lost(ctx, l.builds)
	}
	return nil
}

// failStranded fails the builds and runs waiting in the own queue of a host not seen for
// lostAfter (or forgotten): they are of deployments on its `local` nodes, which no other
// host can reach, and would otherwise wait for ever.
func (q *Queue) failStranded(ctx context.Context) error {
	pool := q.store.RiverPgx()
	rows, err := pool.Query(ctx, `SELECT client_id FROM fedhost_hosts WHERE seen_at >= now() - make_interval(secs => $1)`, lostAfter.Seconds())
	if err != nil {
		return fmt.Errorf("finding the live hosts: %w", err)
	}
	live, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("finding the live hosts: %w", err)
	}
	liveQueues := make([]string, 0, 2*len(live))
	for _, id := range live {
		liveQueues = append(liveQueues, hostQueue(id), hostRunsQueue(id))
	}
	rows, err = pool.Query(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now()
		WHERE kind IN ('build', 'run') AND state IN ('available', 'pending', 'retryable', 'scheduled')
			AND (starts_with(queue, $1) OR starts_with(queue, $2)) AND NOT queue = ANY($3)
		RETURNING kind, args`, hostQueuePrefix, hostRunsQueuePrefix, liveQueues)
	if err != nil {
		return fmt.Errorf("finding the builds waiting for a dead host: %w", err)
	}
	l, err := q.lostJobs(rows)
	rows.Close()
	if err != nil {
		return err
	}
	if len(l.builds)+len(l.runs) == 0 {
		return nil
	}
	q.logger.Warn("queue: builds and runs waiting for the local nodes of a host not seen lately failed", "builds", len(l.builds), "runs", len(l.runs))
	for _, id := range l.runs {
		r, err := q.store.GetRun(ctx, id)
		if err != nil {
			return err
		}
		err = q.store.FinishRun(ctx, id, store.RunEnd{State: store.RunFailed, Reason: q.strandedReason(ctx, r.DeploymentID)})
		if err != nil && !errors.Is(err, store.ErrBuildFinished) {
			return err
		}
	}
	for _, id := range l.builds {
		b, err := q.store.GetBuild(ctx, id)
		if err != nil {
			return err
		}
		reason := q.strandedReason(ctx, b.DeploymentID)
		e := store.BuildEvent{BuildID: id, Step: "queue", Level: store.LevelError, Message: reason}
		if _, err := q.store.AppendBuildEvent(ctx, e); err != nil {
			q.logger.Error("queue: recording a build stranded on a dead host", "build_id", id, "error", err)
		}
		if err := q.store.FailBuilds(ctx, []string{id}, reason); err != nil {
			return err
		}
	}
	return nil
}

// strandedReason says why a build or run of a deployment waiting for its dead node host
// failed, and what to do.
func (q *Queue) strandedReason(ctx context.Context, deploymentID string) string {
	host := "its host"
	if d, err := q.store.GetDeployment(ctx, deploymentID); err == nil && d.NodeHost != "" {
		host = d.NodeHost
	}
	return fmt.Sprintf("lost: this deployment's local nodes run on %s, not seen for %s: start fedhost there again, then submit again", host, lostAfter)
}

// jobRows is what FailLost and failDeadHosts read of the jobs they cancelled.
type jobRows interface {
	Next() bool
	Scan(...any) error
	Err() error
}

// lost holds the builds and operation runs of cancelled jobs.
type lost struct{ builds, runs []string }

// lostJobs reads the cancelled jobs (kind, args): their builds and runs.
func (q *Queue) lostJobs(rows jobRows) (lost, error) {
	var out lost
	for rows.Next() {
		var kind string
		var raw []byte
		if err := rows.Scan(&kind, &raw); err != nil {
			return lost{}, fmt.Errorf("finding lost builds: %w", err)
		}
		switch kind {
		case (runArgs{}).Kind():
			var args runArgs
			if err := json.Unmarshal(raw, &args); err != nil {
				return lost{}, fmt.Errorf("finding lost runs: %w", err)
			}
			out.runs = append(out.runs, args.RunID)
		case (buildArgs{}).Kind():
			var args buildArgs
			if err := json.Unmarshal(raw, &args); err != nil {
				return lost{}, fmt.Errorf("finding lost builds: %w", err)
			}
			out.builds = append(out.builds, args.BuildID)
		default:
			q.logger.Warn("queue: a periodic job was running when its process ended; cancelled", "args", string(raw))
		}
	}
	if err := rows.Err(); err != nil {
		return lost{}, fmt.Errorf("finding lost builds: %w", err)
	}
	return out, nil
}

// markLost fails the lost runs, records in each lost build's log why it failed, and
// fails it.
func (q *Queue) markLost(ctx context.Context, l lost) error {
	for _, id := range l.runs {
		// The command ended with the exec call of the process that stopped.
		err := q.store.FinishRun(ctx, id, store.RunEnd{State: store.RunFailed, Reason: "lost: fedhost stopped while the run ran; run it again"})
		if err != nil && !errors.Is(err, store.ErrBuildFinished) {
			return err
		}
	}
	for _, id := range l.builds {
		e := store.BuildEvent{BuildID: id, Step: "queue", Level: store.LevelError, Message: lostReason}
		if _, err := q.store.AppendBuildEvent(ctx, e); err != nil {
			q.logger.Error("queue: recording a lost build", "build_id", id, "error", err)
		}
	}
	return q.store.FailBuilds(ctx, l.builds, lostReason)
}

// beats runs the heartbeat of a started queue and stops it.
type beats struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func (b *beats) start(q *Queue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		q.heartbeat(ctx)
	}()
}

func (b *beats) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel == nil {
		return
	}
	b.cancel()
	<-b.done
	b.cancel = nil
}

var _ jobRows = pgx.Rows(nil)
