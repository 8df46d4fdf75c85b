package store

import (
	"context"
	"fmt"
)

// BuildCount is how many builds of an operation are in a state.
type BuildCount struct {
	Operation string
	State     BuildState
	Count     int64
}

// UnfinishedBuildCounts counts the queued and running builds by operation and state: one
// grouped query, whatever the number of deployments.
func (s *Store) UnfinishedBuildCounts(ctx context.Context) ([]BuildCount, error) {
	var out []BuildCount
	err := s.db.WithContext(ctx).Model(&Build{}).Select("operation, state, COUNT(*) AS count").
		Where("state IN ?", []BuildState{BuildQueued, BuildRunning}).
		Group("operation, state").Order("operation, state").Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("counting the unfinished builds: %w", err)
	}
	return out, nil
}

// AppBackupOfDeployment is an app's backup record with its deployment's state.
type AppBackupOfDeployment struct {
	AppBackup       `gorm:"embedded"`
	DeploymentState string
}

// AppBackupsWithState returns the backup records of every app with the state of its
// deployment, by deployment and app.
func (s *Store) AppBackupsWithState(ctx context.Context) ([]AppBackupOfDeployment, error) {
	var out []AppBackupOfDeployment
	err := s.db.WithContext(ctx).Table("app_backups").
		Select("app_backups.*, deployments.state AS deployment_state").
		Joins("JOIN deployments ON deployments.id = app_backups.deployment_id").
		Order("app_backups.deployment_id, app_backups.app").Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("reading backup records: %w", err)
	}
	return out, nil
}
