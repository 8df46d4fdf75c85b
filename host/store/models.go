package store

import "time"

// Deployment is one operator's set of apps on one domain.
type Deployment struct {
	ID string `gorm:"primaryKey"`
	// Namespace is the deployment's short DNS-safe tenant id, the prefix of
	// every object it owns in shared services (<namespace>-<name>). Unique.
	Namespace       string
	Name            string
	Owner           string
	Domain          string
	State           string
	CatalogRevision string
	// Config is the configuration JSON, with the secrets the operator typed
	// already taken out of it: it never holds a secret value.
	Config    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BuildState is where a build is in its life.
type BuildState string

// The states of a build. Succeeded, failed and canceled are final.
const (
	BuildQueued    BuildState = "queued"
	BuildRunning   BuildState = "running"
	BuildSucceeded BuildState = "succeeded"
	BuildFailed    BuildState = "failed"
	BuildCanceled  BuildState = "canceled"
)

// Finished reports whether s is a final state.
func (s BuildState) Finished() bool {
	return s == BuildSucceeded || s == BuildFailed || s == BuildCanceled
}

func (s BuildState) valid() bool {
	return s == BuildQueued || s == BuildRunning || s.Finished()
}

// Build is one run of deploying a deployment's configuration.
type Build struct {
	ID           string `gorm:"primaryKey"`
	DeploymentID string
	State        BuildState
	// Reason says why the build is in its state, e.g. the error of a failed
	// build; empty when there is nothing to say.
	Reason    string
	CreatedAt time.Time
	// StartedAt is when the build last started running; nil while queued.
	StartedAt *time.Time
	// FinishedAt is when the build reached a final state.
	FinishedAt *time.Time
}

// Levels of a build event.
const (
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// BuildEvent is one line of a build's log. Seq numbers a build's events from
// 1 in the order they were appended.
type BuildEvent struct {
	BuildID string `gorm:"primaryKey"`
	Seq     int    `gorm:"primaryKey;autoIncrement:false"`
	Time    time.Time
	// Step names the part of the build the event is about, e.g. "provision".
	Step    string
	Level   string
	Message string
	// Progress is the build's completion in percent when the event happened.
	Progress int
}
