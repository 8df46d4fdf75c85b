package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// A migration moves the schema one version forward. Each is written in SQL
// frozen at its version, never as AutoMigrate of the current models: the
// models change with later versions, and a database at version N must always
// be migrated through exactly what version N+1 was.
type migration func(tx *gorm.DB) error

// migrations[i] takes the schema from version i to version i+1. Append only:
// never edit or reorder a migration that has been released.
var migrations = []migration{
	migrate1,
	migrate2,
	migrate3,
	migrate4,
	migrate5,
	migrate6,
	migrate7,
	migrate8,
	migrate9,
	migrate10,
	migrateRuns,
	migrate12,
	migrate13,
	migrate14,
	migrate15,
	migrateScale,
	migrateExports,
	migrateTickDue,
	migrateScheduleSlots,
	migrateDomainsDue,
}

// SchemaVersion returns the schema version this binary knows.
func SchemaVersion() int { return len(migrations) }

// TooNewError is returned by Open for a database migrated by a newer fedhost.
type TooNewError struct {
	Database, Known int
}

func (e *TooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this fedhost knows (version %d): run a newer fedhost or point --database at another database", e.Database, e.Known)
}

// migrate brings the schema to SchemaVersion(), one version per transaction.
// Several processes may start at once on PostgreSQL; the caller serializes
// them with an advisory lock, and on SQLite every transaction begins
// IMMEDIATE, which takes the write lock before the version is read.
func migrate(ctx context.Context, db *gorm.DB) error {
	for {
		done := false
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_version (
				version integer PRIMARY KEY,
				applied_at ` + timestampType(tx) + ` NOT NULL
			)`).Error; err != nil {
				return fmt.Errorf("creating schema_version: %w", err)
			}
			var version int
			if err := tx.Raw(`SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&version).Error; err != nil {
				return fmt.Errorf("reading the schema version: %w", err)
			}
			switch {
			case version > len(migrations):
				return &TooNewError{Database: version, Known: len(migrations)}
			case version == len(migrations):
				done = true
				return nil
			}
			if err := migrations[version](tx); err != nil {
				return fmt.Errorf("migrating the schema to version %d: %w", version+1, err)
			}
			return tx.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, version+1, now()).Error
		})
		if err != nil || done {
			return err
		}
	}
}

func timestampType(tx *gorm.DB) string {
	if tx.Dialector.Name() == "postgres" {
		return "timestamptz"
	}
	// modernc.org/sqlite parses columns declared DATETIME back into time.Time.
	return "datetime"
}

// execAll runs statements in order; {ts} stands for the dialect's timestamp type.
func execAll(tx *gorm.DB, statements ...string) error {
	for _, s := range statements {
		if err := tx.Exec(strings.ReplaceAll(s, "{ts}", timestampType(tx))).Error; err != nil {
			return err
		}
	}
	return nil
}

func migrate1(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE deployments (
			id text PRIMARY KEY,
			namespace text NOT NULL UNIQUE,
			name text NOT NULL,
			owner text NOT NULL,
			domain text NOT NULL,
			state text NOT NULL,
			catalog_revision text NOT NULL,
			config text NOT NULL,
			created_at {ts} NOT NULL,
			updated_at {ts} NOT NULL
		)`,
		`CREATE TABLE builds (
			id text PRIMARY KEY,
			deployment_id text NOT NULL REFERENCES deployments (id),
			state text NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
			reason text NOT NULL,
			created_at {ts} NOT NULL,
			started_at {ts},
			finished_at {ts}
		)`,
		`CREATE INDEX builds_deployment_id ON builds (deployment_id, created_at)`,
		`CREATE TABLE build_events (
			build_id text NOT NULL REFERENCES builds (id),
			seq integer NOT NULL,
			time {ts} NOT NULL,
			step text NOT NULL,
			level text NOT NULL,
			message text NOT NULL,
			progress integer NOT NULL,
			PRIMARY KEY (build_id, seq)
		)`,
	)
}

// migrate2 gives builds what they run (an operation on a configuration snapshot) and
// records the resources a deployment holds.
func migrate2(tx *gorm.DB) error {
	return execAll(tx,
		`ALTER TABLE builds ADD COLUMN operation text NOT NULL DEFAULT 'deploy'`,
		`ALTER TABLE builds ADD COLUMN config text NOT NULL DEFAULT '{}'`,
		`ALTER TABLE deployments ADD COLUMN secret_refs text NOT NULL DEFAULT '{}'`,
		// One build per deployment at a time, whatever process or race inserts it.
		`CREATE UNIQUE INDEX builds_one_unfinished ON builds (deployment_id) WHERE state IN ('queued', 'running')`,
		`CREATE TABLE resources (
			deployment_id text NOT NULL REFERENCES deployments (id),
			name text NOT NULL,
			app text NOT NULL,
			type text NOT NULL,
			provider text NOT NULL,
			spec text NOT NULL,
			spec_hash text NOT NULL,
			result text NOT NULL,
			secret_instance text NOT NULL,
			secret_refs text NOT NULL,
			state text NOT NULL,
			retain_until {ts},
			updated_at {ts} NOT NULL,
			PRIMARY KEY (deployment_id, name)
		)`,
	)
}

// migrate3 adds operator accounts (users, sessions, API tokens) and the audit trail.
// Sessions and tokens are kept only as sha256 digests. audit_chain is one row: the head
// of the chain, which appenders lock to take turns, and the checkpoint a prune leaves.
func migrate3(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE users (
			id text PRIMARY KEY,
			name text NOT NULL UNIQUE,
			password_hash text NOT NULL,
			superuser boolean NOT NULL DEFAULT false,
			disabled boolean NOT NULL DEFAULT false,
			created_at {ts} NOT NULL,
			updated_at {ts} NOT NULL
		)`,
		`CREATE TABLE sessions (
			id_hash text PRIMARY KEY,
			user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
			csrf_token text NOT NULL,
			created_at {ts} NOT NULL,
			last_seen_at {ts} NOT NULL,
			expires_at {ts} NOT NULL
		)`,
		`CREATE INDEX sessions_user_id ON sessions (user_id)`,
		`CREATE TABLE api_tokens (
			id text PRIMARY KEY,
			token_hash text NOT NULL UNIQUE,
			name text NOT NULL,
			user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
			created_at {ts} NOT NULL,
			expires_at {ts} NOT NULL
		)`,
		`CREATE INDEX api_tokens_user_id ON api_tokens (user_id)`,
		`CREATE TABLE audit_events (
			seq bigint PRIMARY KEY,
			time {ts} NOT NULL,
			actor text NOT NULL,
			issuer text NOT NULL,
			action text NOT NULL,
			deployment_id text NOT NULL,
			build_id text NOT NULL,
			subject text NOT NULL,
			request_id text NOT NULL,
			result text NOT NULL CHECK (result IN ('ok', 'denied', 'invalid', 'error')),
			reason text NOT NULL,
			count integer NOT NULL,
			prev_hash text NOT NULL,
			hash text NOT NULL
		)`,
		`CREATE INDEX audit_events_time ON audit_events (time)`,
		`CREATE INDEX audit_events_deployment_id ON audit_events (deployment_id, seq)`,
		`CREATE TABLE audit_chain (
			id integer PRIMARY KEY CHECK (id = 1),
			last_seq bigint NOT NULL,
			last_hash text NOT NULL,
			pruned_seq bigint NOT NULL,
			pruned_hash text NOT NULL
		)`,
		`INSERT INTO audit_chain (id, last_seq, last_hash, pruned_seq, pruned_hash) VALUES (1, 0, '', 0, '')`,
	)
}

// migrate4 gives deployments their update policy and builds the River job that runs them.
func migrate4(tx *gorm.DB) error {
	return execAll(tx,
		`ALTER TABLE deployments ADD COLUMN update_policy text NOT NULL DEFAULT 'manual'`,
		`ALTER TABLE deployments ADD COLUMN update_window_start text NOT NULL DEFAULT ''`,
		`ALTER TABLE deployments ADD COLUMN update_window_minutes integer NOT NULL DEFAULT 0`,
		`ALTER TABLE deployments ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC'`,
		`ALTER TABLE builds ADD COLUMN job_id bigint NOT NULL DEFAULT 0`,
	)
}

// migrate5 records catalog revisions: which version of each app a deployment builds from.
func migrate5(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE catalog_revisions (
			id text PRIMARY KEY,
			apps text NOT NULL,
			created_at {ts} NOT NULL
		)`,
		`ALTER TABLE builds ADD COLUMN catalog_revision text NOT NULL DEFAULT ''`,
		`ALTER TABLE deployments ADD COLUMN last_auto_revision text NOT NULL DEFAULT ''`,
	)
}

// migrate6 records each app's backups (for the schedule, staleness and failures),
// indexes what the retention jobs look for, and the audit events by actor and subject
// (an account's history).
func migrate6(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE app_backups (
			deployment_id text NOT NULL REFERENCES deployments (id),
			app text NOT NULL,
			since {ts} NOT NULL,
			last_attempt_at {ts},
			last_build_id text NOT NULL DEFAULT '',
			last_trigger text NOT NULL DEFAULT '',
			last_success_at {ts},
			last_snapshot text NOT NULL DEFAULT '',
			last_error text NOT NULL DEFAULT '',
			failures integer NOT NULL DEFAULT 0,
			PRIMARY KEY (deployment_id, app)
		)`,
		`CREATE INDEX builds_finished_at ON builds (finished_at)`,
		`CREATE INDEX audit_events_actor ON audit_events (actor, seq)`,
		`CREATE INDEX audit_events_subject ON audit_events (subject, seq)`,
	)
}

// migrate7 lets an account be marked to change its password at the next sign-in (a
// generated password someone else has seen), and records when each API token was last
// used, so that an owner can tell which tokens to revoke.
func migrate7(tx *gorm.DB) error {
	return execAll(tx,
		`ALTER TABLE users ADD COLUMN must_change_password boolean NOT NULL DEFAULT false`,
		`ALTER TABLE api_tokens ADD COLUMN last_used_at {ts}`,
	)
}

// migrate8 records each app's restore drills beside its backups.
func migrate8(tx *gorm.DB) error {
	return execAll(tx,
		`ALTER TABLE app_backups ADD COLUMN last_drill_at {ts}`,
		`ALTER TABLE app_backups ADD COLUMN last_good_drill_at {ts}`,
		`ALTER TABLE app_backups ADD COLUMN drill_snapshot text NOT NULL DEFAULT ''`,
		`ALTER TABLE app_backups ADD COLUMN drill_tables integer NOT NULL DEFAULT 0`,
		`ALTER TABLE app_backups ADD COLUMN drill_rows bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE app_backups ADD COLUMN drill_seconds double precision NOT NULL DEFAULT 0`,
		`ALTER TABLE app_backups ADD COLUMN drill_error text NOT NULL DEFAULT ''`,
	)
}

// migrate9 adds the one-time links by which a deployment's users set their password.
func migrate9(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE password_links (
			token_hash text PRIMARY KEY,
			deployment_id text NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
			user_name text NOT NULL,
			purpose text NOT NULL,
			created_by text NOT NULL,
			created_at {ts} NOT NULL,
			expires_at {ts} NOT NULL
		)`,
		`CREATE INDEX password_links_user ON password_links (deployment_id, user_name)`,
	)
}

// migrate10 keeps the Terraform states of the terraform provider, one per tenant and
// instance: the state sealed by the host (never plain), and the lock a run holds.
func migrate10(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE terraform_states (
			tenant text NOT NULL,
			instance text NOT NULL,
			sealed text NOT NULL,
			lock_id text NOT NULL,
			lock_info text NOT NULL,
			locked_at {ts},
			updated_at {ts} NOT NULL,
			PRIMARY KEY (tenant, instance)
		)`,
	)
}

// migrate12 keeps the life of domains: operators' contacts, each deployment's domain as
// delegated or registered (with the confirmation key recorded before a registration is
// asked for), the registrars' daily snapshots, the domain events with their costs, and
// the periods each app of a deployment was enabled (usage, for billing).
func migrate12(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE contacts (
			id text PRIMARY KEY,
			owner text NOT NULL,
			name text NOT NULL,
			organization text NOT NULL,
			email text NOT NULL,
			phone text NOT NULL,
			street text NOT NULL,
			city text NOT NULL,
			postal_code text NOT NULL,
			country text NOT NULL,
			created_at {ts} NOT NULL,
			updated_at {ts} NOT NULL
		)`,
		`CREATE INDEX contacts_owner ON contacts (owner)`,
		`CREATE TABLE domains (
			name text PRIMARY KEY,
			deployment_id text NOT NULL,
			owner text NOT NULL,
			mode text NOT NULL CHECK (mode IN ('delegated', 'registered')),
			registrar text NOT NULL,
			state text NOT NULL,
			contact_id text NOT NULL,
			price_micros bigint NOT NULL,
			currency text NOT NULL,
			confirmation_key text NOT NULL,
			renewal text NOT NULL DEFAULT 'auto' CHECK (renewal IN ('auto', 'manual')),
			expires_at {ts},
			locked boolean NOT NULL DEFAULT false,
			dnssec boolean NOT NULL DEFAULT false,
			nameservers text NOT NULL,
			message text NOT NULL,
			checked_at {ts},
			updated_at {ts} NOT NULL
		)`,
		`CREATE INDEX domains_deployment_id ON domains (deployment_id)`,
		`CREATE INDEX domains_owner ON domains (owner)`,
		`CREATE TABLE registrar_snapshots (
			registrar text PRIMARY KEY,
			taken_at {ts} NOT NULL,
			domains integer NOT NULL
		)`,
		`CREATE TABLE domain_events (
			id text PRIMARY KEY,
			time {ts} NOT NULL,
			domain text NOT NULL,
			deployment_id text NOT NULL,
			owner text NOT NULL,
			registrar text NOT NULL,
			kind text NOT NULL,
			cost_micros bigint NOT NULL,
			currency text NOT NULL,
			detail text NOT NULL
		)`,
		`CREATE INDEX domain_events_domain ON domain_events (domain, time)`,
		`CREATE INDEX domain_events_owner ON domain_events (owner, time)`,
		`CREATE TABLE app_periods (
			deployment_id text NOT NULL,
			app text NOT NULL,
			started_at {ts} NOT NULL,
			owner text NOT NULL,
			ended_at {ts},
			resources text NOT NULL,
			PRIMARY KEY (deployment_id, app, started_at)
		)`,
		`CREATE INDEX app_periods_owner ON app_periods (owner, started_at)`,
	)
}

// migrate13 adds the failed logins counted by key, so that every host on one database
// slows the same guesses (host/auth). Times are integer microseconds since 1970: the
// throttle's one upsert compares them in SQL, the same on both databases.
func migrate13(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE login_failures (
			throttle_key text PRIMARY KEY,
			failures integer NOT NULL,
			last_failure_us bigint NOT NULL,
			refused integer NOT NULL
		)`,
		`CREATE INDEX login_failures_last ON login_failures (last_failure_us)`,
	)
}

// migrate14 records the host that runs a deployment's `local` nodes.
func migrate14(tx *gorm.DB) error {
	return execAll(tx, `ALTER TABLE deployments ADD COLUMN node_host text NOT NULL DEFAULT ''`)
}

// migrate15 adds the heartbeats of the hosts of a cluster (host/queue): the leader fails
// the builds left running by a host not seen lately.
func migrate15(tx *gorm.DB) error {
	return execAll(tx, `CREATE TABLE fedhost_hosts (
		client_id text PRIMARY KEY,
		seen_at {ts} NOT NULL
	)`)
}

// migrateScale indexes what grows with the deployments (measured at 10,000 and 100,000 in
// docs/benchmarks.md): an operator's page of deployments, newest first, was a backward
// walk of every deployment's ID until 50 of its own turned up; the jobs page's newest
// builds were a sort of every build.
func migrateScale(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE INDEX deployments_owner ON deployments (owner, id)`,
		`CREATE INDEX builds_created_at ON builds (created_at, id)`,
	)
}

// migrateExports records the exports of deployments to another fedhost (issue 14):
// only the digest of the confirmation token is kept, never the migration string.
func migrateExports(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE TABLE exports (
			id text PRIMARY KEY,
			deployment_id text NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
			token_hash text NOT NULL,
			apps text NOT NULL,
			state text NOT NULL,
			created_at {ts} NOT NULL,
			expires_at {ts} NOT NULL,
			updated_at {ts} NOT NULL
		)`,
		`CREATE INDEX exports_deployment ON exports (deployment_id, created_at)`,
		`CREATE INDEX exports_expiry ON exports (state, expires_at)`,
	)
}

// now is the store's clock: UTC at the precision both databases keep, so a
// value written and read back compares equal.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}
