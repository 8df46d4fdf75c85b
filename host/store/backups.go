package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// AppBackups returns the backup records of a deployment's apps, by app; deploymentID ""
// returns those of every deployment.
func (s *Store) AppBackups(ctx context.Context, deploymentID string) ([]AppBackup, error) {
	var out []AppBackup
	q := s.db.WithContext(ctx).Order("deployment_id, app")
	if deploymentID != "" {
		q = q.Where("deployment_id = ?", deploymentID)
	}
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("reading backup records: %w", err)
	}
	return out, nil
}

// EnsureAppBackup records that an app's data needs backups from since on, unless it is
// recorded already.
func (s *Store) EnsureAppBackup(ctx context.Context, deploymentID, app string, since time.Time) error {
	r := AppBackup{DeploymentID: deploymentID, App: app, Since: since.UTC().Truncate(time.Microsecond)}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&r).Error; err != nil {
		return fmt.Errorf("recording the backups of %s in deployment %s: %w", app, deploymentID, err)
	}
	return nil
}

// BackupStarted records a backup's start: the schedule counts from it, whatever its end.
func (s *Store) BackupStarted(ctx context.Context, deploymentID, app, buildID, trigger string, at time.Time) error {
	at = at.UTC().Truncate(time.Microsecond)
	if err := s.EnsureAppBackup(ctx, deploymentID, app, at); err != nil {
		return err
	}
	return s.db.WithContext(ctx).Model(&AppBackup{}).Where("deployment_id = ? AND app = ?", deploymentID, app).
		Updates(map[string]any{"last_attempt_at": at, "last_build_id": buildID, "last_trigger": trigger}).Error
}

// BackupFinished records a backup's end: snapshot on success, or the reason it failed
// (reason must hold no secret).
func (s *Store) BackupFinished(ctx context.Context, deploymentID, app, snapshot, reason string, at time.Time) error {
	q := s.db.WithContext(ctx).Model(&AppBackup{}).Where("deployment_id = ? AND app = ?", deploymentID, app)
	if reason == "" {
		at = at.UTC().Truncate(time.Microsecond)
		return q.Updates(map[string]any{"last_success_at": at, "last_snapshot": snapshot, "last_error": "", "failures": 0}).Error
	}
	return q.Updates(map[string]any{"last_error": bounded(reason, maxReason), "failures": gorm.Expr("failures + 1")}).Error
}

// DrillStarted records a restore drill's start: the next one is due a day after it,
// whatever its end.
func (s *Store) DrillStarted(ctx context.Context, deploymentID, app string, at time.Time) error {
	return s.db.WithContext(ctx).Model(&AppBackup{}).Where("deployment_id = ? AND app = ?", deploymentID, app).
		Update("last_drill_at", at.UTC().Truncate(time.Microsecond)).Error
}

// Drill is how a restore drill went: the snapshot restored and what was found in the
// scratch database, or why it failed (Error, which must hold no secret).
type Drill struct {
	Snapshot string
	Tables   int
	Rows     int64
	Seconds  float64
	Error    string
}

// DrillFinished records a restore drill's end.
func (s *Store) DrillFinished(ctx context.Context, deploymentID, app string, d Drill, at time.Time) error {
	q := s.db.WithContext(ctx).Model(&AppBackup{}).Where("deployment_id = ? AND app = ?", deploymentID, app)
	if d.Error != "" {
		// The counts and time stay those of the last good drill, which the page shows.
		return q.Update("drill_error", bounded(d.Error, maxReason)).Error
	}
	return q.Updates(map[string]any{"last_good_drill_at": at.UTC().Truncate(time.Microsecond), "drill_snapshot": bounded(d.Snapshot, 64),
		"drill_tables": d.Tables, "drill_rows": d.Rows, "drill_seconds": d.Seconds, "drill_error": ""}).Error
}

// DeleteAppBackups forgets the backup records of a deployment's app ("" for all its apps).
func (s *Store) DeleteAppBackups(ctx context.Context, deploymentID, app string) error {
	q := s.db.WithContext(ctx).Where("deployment_id = ?", deploymentID)
	if app != "" {
		q = q.Where("app = ?", app)
	}
	return q.Delete(&AppBackup{}).Error
}

// PruneBuildLogs deletes the events of builds that finished before t, and returns how
// many it deleted. The builds themselves stay: their state and reason are small.
func (s *Store) PruneBuildLogs(ctx context.Context, t time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM build_events WHERE build_id IN
		(SELECT id FROM builds WHERE finished_at IS NOT NULL AND finished_at < ?)`, t.UTC())
	if res.Error != nil {
		return 0, fmt.Errorf("pruning build logs: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// maxReason bounds the reasons a backup or a drill failed, as kept.
const maxReason = 2000

// bounded cuts s to at most max bytes, at a character's start, and says it was cut.
func bounded(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(" [cut]")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " [cut]"
}
