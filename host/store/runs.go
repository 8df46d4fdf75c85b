package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// RunState is where a run of an app's operation is in its life.
type RunState string

// The states of a run. All but queued and running are final.
const (
	RunQueued    RunState = "queued"
	RunRunning   RunState = "running"
	RunSucceeded RunState = "succeeded"
	RunFailed    RunState = "failed"
	RunCanceled  RunState = "canceled"
	RunTimedOut  RunState = "timed_out"
)

// Finished reports whether s is a final state.
func (s RunState) Finished() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCanceled || s == RunTimedOut
}

// Run triggers.
const (
	RunManual    = "manual"
	RunScheduled = "scheduled"
)

// RunsKept is how many runs a deployment keeps; older ones go with their output.
const RunsKept = 100

// RunOutputMax is the most output a run keeps, in bytes; the rest is cut, and said.
const RunOutputMax = 1 << 20

// Run is one run of an app's operation (a command in one of its nodes).
type Run struct {
	ID           string `gorm:"primaryKey"`
	DeploymentID string
	App          string
	Operation    string
	// Node is the node the command runs in, known once the app rendered it.
	Node string
	// Exclusive runs go one at a time per node.
	Exclusive bool
	// Actor is who asked for the run (a user name, or "scheduler").
	Actor   string
	Trigger string
	// Input is the input JSON with every secret (writeOnly) value taken out.
	Input string
	// SecretInstance is the secret resource instance that keeps the secret inputs until
	// the run ends, SecretRefs their references by input name (a JSON object).
	SecretInstance string
	SecretRefs     string
	// Sensitive runs keep no output.
	Sensitive  bool
	OutputFile string
	State      RunState
	// Reason says why the run is in its state (the command's status, an error).
	Reason          string
	ExitCode        *int
	OutputBytes     int64
	OutputTruncated bool
	JobID           int64
	CreatedAt       time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
}

// RunOutput is one piece of a run's output. Seq numbers a run's pieces from 1.
type RunOutput struct {
	RunID string `gorm:"primaryKey"`
	Seq   int    `gorm:"primaryKey;autoIncrement:false"`
	Time  time.Time
	// Stream is stdout, stderr or fedhost (what the host says about the run).
	Stream string
	Data   string
}

// TableName keeps the table's name singular-free and plain.
func (RunOutput) TableName() string { return "run_output" }

// migrateRuns adds the runs of apps' operations and their output. One exclusive run per
// node runs at a time: a partial unique index, which both databases enforce atomically.
func migrateRuns(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE runs (
			id text PRIMARY KEY,
			deployment_id text NOT NULL REFERENCES deployments (id),
			app text NOT NULL,
			operation text NOT NULL,
			node text NOT NULL DEFAULT '',
			exclusive boolean NOT NULL DEFAULT true,
			actor text NOT NULL,
			trigger text NOT NULL,
			input text NOT NULL,
			secret_instance text NOT NULL DEFAULT '',
			secret_refs text NOT NULL DEFAULT '',
			sensitive boolean NOT NULL DEFAULT false,
			output_file text NOT NULL DEFAULT '',
			state text NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'canceled', 'timed_out')),
			reason text NOT NULL DEFAULT '',
			exit_code integer,
			output_bytes bigint NOT NULL DEFAULT 0,
			output_truncated boolean NOT NULL DEFAULT false,
			job_id bigint NOT NULL DEFAULT 0,
			created_at {ts} NOT NULL,
			started_at {ts},
			finished_at {ts}
		)`,
		`CREATE INDEX runs_deployment ON runs (deployment_id, created_at)`,
		`CREATE INDEX runs_finished_at ON runs (finished_at)`,
		`CREATE UNIQUE INDEX runs_one_per_node ON runs (deployment_id, node) WHERE state = 'running' AND exclusive`,
		`CREATE TABLE run_schedules (
			id text PRIMARY KEY,
			deployment_id text NOT NULL REFERENCES deployments (id),
			app text NOT NULL,
			operation text NOT NULL,
			cron text NOT NULL,
			input text NOT NULL,
			actor text NOT NULL,
			next_at {ts} NOT NULL,
			last_at {ts},
			last_run_id text NOT NULL DEFAULT '',
			created_at {ts} NOT NULL
		)`,
		`CREATE INDEX run_schedules_next_at ON run_schedules (next_at)`,
		`CREATE TABLE run_output (
			run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
			seq integer NOT NULL,
			time {ts} NOT NULL,
			stream text NOT NULL,
			data text NOT NULL,
			PRIMARY KEY (run_id, seq)
		)`,
	)
}

// CreateRun stores r as a new queued run and returns it with its ID.
func (s *Store) CreateRun(ctx context.Context, r Run) (Run, error) {
	r.ID, r.State, r.CreatedAt = newID(), RunQueued, now()
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		if _, fk := constraintViolation(err); fk {
			return Run{}, fmt.Errorf("deployment %s: %w", r.DeploymentID, ErrNotFound)
		}
		return Run{}, fmt.Errorf("creating a run of %s %s: %w", r.App, r.Operation, err)
	}
	return r, nil
}

// GetRun returns the run with the given ID.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	var r Run
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Run{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("reading run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns returns a deployment's runs, newest first, at most limit.
func (s *Store) ListRuns(ctx context.Context, deploymentID string, limit int) ([]Run, error) {
	var runs []Run
	if err := s.db.WithContext(ctx).Where("deployment_id = ?", deploymentID).
		Order("created_at DESC, id DESC").Limit(limit).Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("listing the runs of deployment %s: %w", deploymentID, err)
	}
	return runs, nil
}

// CancelQueuedRun cancels a run that has not started; it wraps ErrBuildFinished when the
// run is not queued (any more).
func (s *Store) CancelQueuedRun(ctx context.Context, id, reason string) error {
	res := s.db.WithContext(ctx).Model(&Run{}).Where("id = ? AND state = ?", id, RunQueued).
		Updates(map[string]any{"state": RunCanceled, "reason": reason, "finished_at": now(), "secret_refs": ""})
	if res.Error != nil {
		return fmt.Errorf("canceling run %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("run %s is not queued: %w", id, ErrBuildFinished)
	}
	return nil
}

// ErrNodeBusy is wrapped by StartRun when another exclusive run holds the node.
var ErrNodeBusy = errors.New("another run is going on the node")

// StartRun marks a queued run running in node, worked by River job jobID. It wraps
// ErrNodeBusy when the run is exclusive and another exclusive run of the deployment runs
// in that node, and ErrBuildFinished when the run is already finished.
//
// The start time is read once the node is taken: the update that takes it may wait for
// the run that held the node to commit its end, and a time read before that wait could
// come before the other run's finish.
func (s *Store) StartRun(ctx context.Context, id, node string, jobID int64) error {
	var started bool
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&Run{}).Where("id = ? AND state = ?", id, RunQueued).
			Updates(map[string]any{"state": RunRunning, "node": node, "job_id": jobID})
		if res.Error != nil || res.RowsAffected != 1 {
			return res.Error
		}
		started = true
		return tx.Model(&Run{}).Where("id = ?", id).Update("started_at", now()).Error
	})
	if err != nil {
		if unique, _ := constraintViolation(err); unique {
			return fmt.Errorf("run %s: %w", id, ErrNodeBusy)
		}
		return fmt.Errorf("starting run %s: %w", id, err)
	}
	if started {
		return nil
	}
	r, err := s.GetRun(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("run %s is already %s: %w", id, r.State, ErrBuildFinished)
}

// RunEnd is how a run ended.
type RunEnd struct {
	State           RunState
	Reason          string
	ExitCode        *int
	OutputBytes     int64
	OutputTruncated bool
	// Last, if set, is a last piece of output recorded with the end.
	Last *RunOutput
	// PruneBefore, if set, prunes the deployment's runs with the end (see PruneRuns).
	PruneBefore *time.Time
}

// FinishRun records the end of a run that is not finished yet, in one transaction with
// its last piece of output and the pruning of old runs; it wraps ErrBuildFinished when
// the run is finished already.
func (s *Store) FinishRun(ctx context.Context, id string, end RunEnd) error {
	if !end.State.Finished() {
		return fmt.Errorf("run %s: %q is not a final state", id, end.State)
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var r Run
		if err := tx.Select("id", "deployment_id", "state").Where("id = ?", id).Take(&r).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("run %s: %w", id, ErrNotFound)
			}
			return err
		}
		if r.State.Finished() {
			return fmt.Errorf("run %s is already %s: %w", id, r.State, ErrBuildFinished)
		}
		if err := tx.Model(&Run{}).Where("id = ?", id).Updates(map[string]any{
			"state": end.State, "reason": end.Reason, "exit_code": end.ExitCode, "output_bytes": end.OutputBytes,
			"output_truncated": end.OutputTruncated, "finished_at": now(), "secret_refs": "",
		}).Error; err != nil {
			return err
		}
		if end.Last != nil {
			last := *end.Last
			last.RunID = id
			if last.Time.IsZero() {
				last.Time = now()
			}
			if err := tx.Create(&last).Error; err != nil {
				return err
			}
		}
		if end.PruneBefore != nil {
			if _, err := pruneRuns(tx, r.DeploymentID, *end.PruneBefore); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finishing run %s: %w", id, err)
	}
	return nil
}

// AppendRunOutput stores one piece of a run's output; the run's worker numbers them.
func (s *Store) AppendRunOutput(ctx context.Context, o RunOutput) error {
	if o.Time.IsZero() {
		o.Time = now()
	}
	if err := s.db.WithContext(ctx).Create(&o).Error; err != nil {
		return fmt.Errorf("appending to the output of run %s: %w", o.RunID, err)
	}
	return nil
}

// RunOutputs returns a run's output after seq, in order, at most limit pieces.
func (s *Store) RunOutputs(ctx context.Context, runID string, afterSeq, limit int) ([]RunOutput, error) {
	var out []RunOutput
	if err := s.db.WithContext(ctx).Where("run_id = ? AND seq > ?", runID, afterSeq).
		Order("seq").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("reading the output of run %s: %w", runID, err)
	}
	return out, nil
}

// PruneRuns deletes, with their output, the finished runs of a deployment beyond the
// newest RunsKept, and every finished run that ended before t; it returns how many.
func (s *Store) PruneRuns(ctx context.Context, deploymentID string, t time.Time) (int64, error) {
	var deleted int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		deleted, err = pruneRuns(tx, deploymentID, t)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning the runs of deployment %s: %w", deploymentID, err)
	}
	return deleted, nil
}

func pruneRuns(tx *gorm.DB, deploymentID string, t time.Time) (int64, error) {
	var deleted int64
	err := func() error {
		var old []string
		if err := tx.Model(&Run{}).Where("deployment_id = ?", deploymentID).
			Order("created_at DESC, id DESC").Offset(RunsKept).Pluck("id", &old).Error; err != nil {
			return err
		}
		q := tx.Where("finished_at IS NOT NULL AND finished_at < ?", t.UTC())
		if len(old) > 0 {
			q = tx.Where("finished_at IS NOT NULL AND (finished_at < ? OR id IN ?)", t.UTC(), old)
		}
		var ids []string
		if err := q.Model(&Run{}).Where("deployment_id = ?", deploymentID).Pluck("id", &ids).Error; err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if err := tx.Where("run_id IN ?", ids).Delete(&RunOutput{}).Error; err != nil {
			return err
		}
		res := tx.Where("id IN ?", ids).Delete(&Run{})
		deleted = res.RowsAffected
		return res.Error
	}()
	return deleted, err
}

// RunSchedule queues a run of an app's operation on a cron schedule, in the deployment's
// time zone.
type RunSchedule struct {
	ID           string `gorm:"primaryKey"`
	DeploymentID string
	App          string
	Operation    string
	Cron         string
	// Input is the runs' input; a schedule holds no secret input.
	Input string
	// Actor is who made the schedule.
	Actor string
	// NextAt is when the schedule next queues a run; LastAt when it last did, and
	// LastRunID that run.
	NextAt    time.Time
	LastAt    *time.Time
	LastRunID string
	CreatedAt time.Time
}

// CreateRunSchedule stores a new schedule and returns it with its ID.
func (s *Store) CreateRunSchedule(ctx context.Context, r RunSchedule) (RunSchedule, error) {
	r.ID, r.CreatedAt, r.NextAt = newID(), now(), r.NextAt.UTC()
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		if _, fk := constraintViolation(err); fk {
			return RunSchedule{}, fmt.Errorf("deployment %s: %w", r.DeploymentID, ErrNotFound)
		}
		return RunSchedule{}, fmt.Errorf("creating a schedule of %s %s: %w", r.App, r.Operation, err)
	}
	return r, nil
}

// RunSchedules returns a deployment's schedules, the soonest first.
func (s *Store) RunSchedules(ctx context.Context, deploymentID string) ([]RunSchedule, error) {
	var out []RunSchedule
	if err := s.db.WithContext(ctx).Where("deployment_id = ?", deploymentID).Order("next_at, id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing the schedules of deployment %s: %w", deploymentID, err)
	}
	return out, nil
}

// DueRunSchedules returns every schedule whose next run is at t or before.
func (s *Store) DueRunSchedules(ctx context.Context, t time.Time) ([]RunSchedule, error) {
	var out []RunSchedule
	if err := s.db.WithContext(ctx).Where("next_at <= ?", t.UTC()).Order("next_at, id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing the schedules due: %w", err)
	}
	return out, nil
}

// ClaimSchedule moves a due schedule's next time to next; it returns false when its
// next time had moved already (another tick took it), and the caller queues nothing.
func (s *Store) ClaimSchedule(ctx context.Context, sc RunSchedule, next time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&RunSchedule{}).Where("id = ? AND next_at = ?", sc.ID, sc.NextAt.UTC()).
		Update("next_at", next.UTC())
	if res.Error != nil {
		return false, fmt.Errorf("claiming schedule %s: %w", sc.ID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// DeleteRunSchedule removes a deployment's schedule.
func (s *Store) DeleteRunSchedule(ctx context.Context, deploymentID, id string) error {
	res := s.db.WithContext(ctx).Where("deployment_id = ? AND id = ?", deploymentID, id).Delete(&RunSchedule{})
	if res.Error != nil {
		return fmt.Errorf("removing schedule %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("schedule %s: %w", id, ErrNotFound)
	}
	return nil
}
