package queue

import (
	"context"
	"encoding/json"
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
		_, err := q.store.RiverPgx().Exec(ctx, `INSERT INTO fedhost_hosts (client_id, seen_at) VALUES ($1, now())
			ON CONFLICT (client_id) DO UPDATE SET seen_at = now()`, q.clientID)
		if err != nil && ctx.Err() == nil {
			q.logger.Error("queue: recording this host's heartbeat", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// failDeadHosts fails the builds whose jobs run on hosts not seen for lostAfter, as
// FailLost does at a host's own restart.
func (q *Queue) failDeadHosts(ctx context.Context, _ time.Time) error {
	rows, err := q.store.RiverPgx().Query(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now()
		WHERE kind = 'build' AND state = 'running' AND attempted_by[array_upper(attempted_by, 1)] IN (
			SELECT client_id FROM fedhost_hosts WHERE seen_at < now() - make_interval(secs => $1))
		RETURNING kind, args`, lostAfter.Seconds())
	if err != nil {
		return fmt.Errorf("finding the builds of dead hosts: %w", err)
	}
	ids, err := q.lostBuilds(rows)
	rows.Close()
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		q.logger.Warn("queue: builds of a host not seen lately failed as lost", "builds", len(ids))
	}
	// A host gone for a week is forgotten, so the table stays as small as the cluster.
	if _, err := q.store.RiverPgx().Exec(ctx, `DELETE FROM fedhost_hosts WHERE seen_at < now() - interval '7 days'`); err != nil {
		return fmt.Errorf("forgetting hosts gone for a week: %w", err)
	}
	return q.markLost(ctx, ids)
}

// jobRows is what FailLost and failDeadHosts read of the jobs they cancelled.
type jobRows interface {
	Next() bool
	Scan(...any) error
	Err() error
}

// lostBuilds returns the build ids of cancelled jobs (kind, args).
func (q *Queue) lostBuilds(rows jobRows) ([]string, error) {
	var ids []string
	for rows.Next() {
		var kind string
		var raw []byte
		if err := rows.Scan(&kind, &raw); err != nil {
			return nil, fmt.Errorf("finding lost builds: %w", err)
		}
		if kind != (buildArgs{}).Kind() {
			q.logger.Warn("queue: a periodic job was running when its process ended; cancelled", "args", string(raw))
			continue
		}
		var args buildArgs
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("finding lost builds: %w", err)
		}
		ids = append(ids, args.BuildID)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finding lost builds: %w", err)
	}
	return ids, nil
}

// markLost records in each build's log why it failed, and fails it.
func (q *Queue) markLost(ctx context.Context, ids []string) error {
	for _, id := range ids {
		e := store.BuildEvent{BuildID: id, Step: "queue", Level: store.LevelError, Message: lostReason}
		if _, err := q.store.AppendBuildEvent(ctx, e); err != nil {
			q.logger.Error("queue: recording a lost build", "build_id", id, "error", err)
		}
	}
	return q.store.FailBuilds(ctx, ids, lostReason)
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
