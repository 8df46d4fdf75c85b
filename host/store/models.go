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
	Config string
	// SecretRefs maps the JSON pointer of each secret the operator typed to its
	// reference in the secret resource (a JSON object).
	SecretRefs string
	// UpdatePolicy is manual, automatic or window; the window starts daily at
	// UpdateWindowStart (HH:MM) in TimeZone and lasts UpdateWindowMinutes.
	// LastAutoRevision is the newest revision the scheduler submitted automatically, so
	// that it tries each revision once.
	LastAutoRevision    string
	UpdatePolicy        string
	UpdateWindowStart   string
	UpdateWindowMinutes int
	TimeZone            string
	// NodeHost is the fedhost (its River client ID) that runs the deployment's nodes when
	// its instance provider is `local`, recorded by its first build: its later builds run
	// on that host only (docs/architecture.md, cluster mode). Empty: any host.
	NodeHost  string
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

// Operations a build runs.
const (
	OperationDeploy  = "deploy"
	OperationSuspend = "suspend"
	OperationDestroy = "destroy"
	OperationBackup  = "backup"
	OperationRestore = "restore"
	// OperationDrill restores an app's newest backup into a scratch database, checks it
	// and drops it: a backup nobody has restored is a hope, not a backup.
	OperationDrill = "drill"
	// OperationExport stops the nodes, takes a final backup of each app and mints read-only
	// keys to the backups for a move to another fedhost (host/deploy/export.go).
	OperationExport = "export"
	// OperationRevokeExport takes an export's read-only keys back, after the target's
	// confirmation or the expiry (host/deploy/export.go).
	OperationRevokeExport = "revoke-export"
)

// Build is one run of deploying a deployment's configuration.
type Build struct {
	ID           string `gorm:"primaryKey"`
	DeploymentID string
	// Operation is deploy, suspend or destroy.
	Operation string
	// Config is the configuration the build deploys (secrets taken out).
	Config string
	// JobID is the River job that runs the build, 0 before it is queued.
	JobID int64
	// CatalogRevision is the revision the build deploys.
	CatalogRevision string
	State           BuildState
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

// Resource states.
const (
	// ResourceProvisioned: the provider made it and it is in use.
	ResourceProvisioned = "provisioned"
	// ResourceKept: its app is disabled without deleteData; the data stays.
	ResourceKept = "kept"
	// ResourceRetained: deprovisioned with retain (a backup bucket after a destroy)
	// until RetainUntil.
	ResourceRetained = "retained"
	// ResourceStopped: an instance stopped by a suspend; its volumes stay.
	ResourceStopped = "stopped"
)

// Resource is one resource a deployment holds at a provider.
type Resource struct {
	DeploymentID string `gorm:"primaryKey"`
	// Name is the instance name: <app>-<request> or <app>-<node>.
	Name     string `gorm:"primaryKey"`
	App      string
	Type     string
	Provider string
	// Spec is the request as last provisioned; SpecHash its digest.
	Spec     string
	SpecHash string
	// Result is the provider's result with its secret references resolvable by the
	// secret resource; never a secret value.
	Result string
	// SecretInstance is the instance of the secret resource that keeps the values the
	// provider returned, SecretRefs their references by key (a JSON object).
	SecretInstance string
	SecretRefs     string
	State          string
	RetainUntil    *time.Time
	// RenewAfter is, for a tls row holding a certificate, when the scheduler renews it
	// (its result's renew_after; the epoch when the result gives none, so that the tick
	// reads it and decides); nil for every other row. PutResource sets it.
	RenewAfter *time.Time
	UpdatedAt  time.Time
}

// CatalogRevision is an immutable record of which version of each app a catalog offers.
type CatalogRevision struct {
	ID string `gorm:"primaryKey"`
	// Apps is a JSON object of app name to version.
	Apps      string
	CreatedAt time.Time
}

// Backup triggers: who asked for a backup.
const (
	BackupManual    = "manual"    // an operator, through the UI or the API
	BackupScheduled = "scheduled" // the app's backup schedule
	BackupUpgrade   = "upgrade"   // the build that upgrades the app, before it changes anything
	BackupExport    = "export"    // the export to another fedhost, its final backup
)

// AppBackup is where an app's backups in one deployment stand: the schedule starts from
// it, and staleness and failures are read from it.
type AppBackup struct {
	DeploymentID string `gorm:"primaryKey"`
	App          string `gorm:"primaryKey"`
	// Since is when the app's data was first seen to need backups: before any good
	// backup, staleness counts from here.
	Since time.Time
	// LastAttemptAt is when the newest backup started, LastBuildID its build and
	// LastTrigger who asked for it.
	LastAttemptAt *time.Time
	LastBuildID   string
	LastTrigger   string
	// LastSuccessAt is when the newest good backup finished, LastSnapshot its id.
	LastSuccessAt *time.Time
	LastSnapshot  string
	// LastError is why the newest backup failed; empty once one succeeds again.
	// Failures counts the failed backups since the last good one.
	LastError string
	Failures  int
	// LastDrillAt is when the newest restore drill started; LastGoodDrillAt when the
	// newest good one finished, of snapshot DrillSnapshot, finding DrillTables tables and
	// DrillRows rows in DrillSeconds (a failed drill changes none of these). DrillError
	// is why the newest drill failed, empty once one succeeds again.
	LastDrillAt     *time.Time
	LastGoodDrillAt *time.Time
	DrillSnapshot   string
	DrillTables     int
	DrillRows       int64
	DrillSeconds    float64
	DrillError      string
}
