package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrSlotTaken is returned when a scheduled job's slot (its deployment, kind, name and
// scheduled time) is taken already: another scheduler, an old leader still ticking while
// a new one starts, submitted that time. The caller skips it: nothing is queued.
var ErrSlotTaken = errors.New("this scheduled time is submitted already")

// The kinds of scheduled jobs that take slots.
const (
	SlotBackup = "backup"
	SlotRun    = "run"
)

// SlotsKept is how long a slot is kept after its scheduled time (see PruneScheduleSlots).
const SlotsKept = 7 * 24 * time.Hour

// Slot is one scheduled time of a scheduled job: the scheduler submits each at most once.
type Slot struct {
	// Name is the app of a scheduled backup, the schedule (its ID) of a scheduled run.
	Name string
	// At is the scheduled time.
	At time.Time
}

// ScheduleSlot is a taken slot: a scheduled job submitted for its time.
type ScheduleSlot struct {
	DeploymentID string    `gorm:"primaryKey"`
	Kind         string    `gorm:"primaryKey"`
	Name         string    `gorm:"primaryKey"`
	ScheduledAt  time.Time `gorm:"primaryKey"`
	// JobID is the build (a backup) or run (a scheduled run) submitted for the slot.
	JobID     string
	CreatedAt time.Time
}

// migrateScheduleSlots adds the slots of scheduled jobs, one row per deployment, kind,
// name and scheduled time: the primary key is what makes two schedulers (an old leader
// and a new one) submit each scheduled time at most once, on both databases.
func migrateScheduleSlots(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE schedule_slots (
			deployment_id text NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
			kind text NOT NULL,
			name text NOT NULL,
			scheduled_at {ts} NOT NULL,
			job_id text NOT NULL,
			created_at {ts} NOT NULL,
			PRIMARY KEY (deployment_id, kind, name, scheduled_at)
		)`,
		`CREATE INDEX schedule_slots_scheduled_at ON schedule_slots (scheduled_at)`,
	)
}

// takeSlot takes a slot inside tx for jobID, or returns ErrSlotTaken. On PostgreSQL a
// concurrent insert of the same slot waits for the other transaction: taken if it
// commits, free if it rolls back.
func takeSlot(tx *gorm.DB, deploymentID, kind string, slot Slot, jobID string) error {
	row := ScheduleSlot{DeploymentID: deploymentID, Kind: kind, Name: slot.Name,
		ScheduledAt: slotTime(slot.At), JobID: jobID, CreatedAt: now()}
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%s %s of deployment %s at %s: %w", kind, slot.Name, deploymentID, row.ScheduledAt.Format(time.RFC3339), ErrSlotTaken)
	}
	return nil
}

// slotTime is a scheduled time as both databases keep it, so that the same time computed
// by two hosts is the same key.
func slotTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// ScheduleSlots returns a deployment's taken slots of a kind, in scheduled order.
func (s *Store) ScheduleSlots(ctx context.Context, deploymentID, kind string) ([]ScheduleSlot, error) {
	var out []ScheduleSlot
	if err := s.db.WithContext(ctx).Where("deployment_id = ? AND kind = ?", deploymentID, kind).
		Order("scheduled_at, name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("reading the schedule slots of deployment %s: %w", deploymentID, err)
	}
	return out, nil
}

// PruneScheduleSlots deletes the slots scheduled before t, but the newest of each job (a
// deployment's kind and name) while its schedule exists: that one is what a scheduler
// whose record did not move since (a backup whose build failed before it began, of a
// schedule firing less often than t is old) would compute again. It returns how many.
func (s *Store) PruneScheduleSlots(ctx context.Context, t time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM schedule_slots WHERE scheduled_at < ? AND (
			EXISTS (SELECT 1 FROM schedule_slots n WHERE n.deployment_id = schedule_slots.deployment_id
				AND n.kind = schedule_slots.kind AND n.name = schedule_slots.name AND n.scheduled_at > schedule_slots.scheduled_at)
			OR (kind = ? AND NOT EXISTS (SELECT 1 FROM run_schedules r WHERE r.id = schedule_slots.name)))`,
		slotTime(t), SlotRun)
	if res.Error != nil {
		return 0, fmt.Errorf("pruning the schedule slots: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// CreateScheduledRun stores r, a run a schedule queues for its time at, as a new queued
// run, in one transaction with the slot (the schedule, at) and the schedule's record of
// its last run (queued at ranAt). It returns ErrSlotTaken, and stores nothing, when
// another scheduler took that slot.
func (s *Store) CreateScheduledRun(ctx context.Context, r Run, scheduleID string, at, ranAt time.Time) (Run, error) {
	r.ID, r.State, r.CreatedAt = newID(), RunQueued, now()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := takeSlot(tx, r.DeploymentID, SlotRun, Slot{Name: scheduleID, At: at}, r.ID); err != nil {
			return err
		}
		if err := tx.Create(&r).Error; err != nil {
			return err
		}
		return tx.Model(&RunSchedule{}).Where("id = ?", scheduleID).
			Updates(map[string]any{"last_at": ranAt.UTC(), "last_run_id": r.ID}).Error
	})
	if errors.Is(err, ErrSlotTaken) {
		return Run{}, err
	}
	if err != nil {
		if _, fk := constraintViolation(err); fk {
			return Run{}, fmt.Errorf("deployment %s: %w", r.DeploymentID, ErrNotFound)
		}
		return Run{}, fmt.Errorf("creating a scheduled run of %s %s: %w", r.App, r.Operation, err)
	}
	return r, nil
}
