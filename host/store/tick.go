package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
)

// The scheduler's tick asks these queries for its candidates instead of reading every
// deployment and resource: each returns a superset of what is due (never less), read
// through indexed columns, and the engine decides on the candidates exactly as it did on
// everything. docs/architecture.md describes them.

// tickChunk bounds the IDs of one IN list.
const tickChunk = 500

// renewAfter is the renew_after column of a resource row: for a tls row whose result
// holds a certificate, its result's renew_after, or the epoch when that does not parse
// (the tick then reads the row at every tick and decides from the certificate itself);
// nil for every other row, which no renewal concerns.
func renewAfter(typ, result string) *time.Time {
	if typ != "tls" {
		return nil
	}
	var res struct {
		Certificate string `json:"certificate"`
		RenewAfter  string `json:"renew_after"`
	}
	if json.Unmarshal([]byte(result), &res) != nil || res.Certificate == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, res.RenewAfter)
	if err != nil {
		t = time.Unix(0, 0)
	}
	// Truncated, never rounded: the column is never later than the certificate's time.
	t = t.UTC().Truncate(time.Microsecond)
	return &t
}

// migrateTickDue adds what the tick asks the database for its candidates with: the
// renew_after of each tls row (computed here for the rows written before, as PutResource
// does for the rows written after) and the indexes of each job's query.
func migrateTickDue(tx *gorm.DB) error {
	if err := execAll(tx,
		`ALTER TABLE resources ADD COLUMN renew_after {ts}`,
		`CREATE INDEX resources_renew_after ON resources (type, renew_after)`,
		// Covering: the backups' anti-join reads the index alone, not the rows with their results.
		`CREATE INDEX resources_type ON resources (type, deployment_id, app, state)`,
		`CREATE INDEX resources_name ON resources (name)`,
		`CREATE INDEX app_backups_last_attempt ON app_backups (app, last_attempt_at)`,
		`CREATE INDEX app_backups_last_drill ON app_backups (last_drill_at)`,
		`CREATE INDEX deployments_update_policy ON deployments (state, update_policy)`,
	); err != nil {
		return err
	}
	return setRenewAfter(tx)
}

// setRenewAfter sets the renew_after of every tls row from its result.
func setRenewAfter(tx *gorm.DB) error {
	// In pages of the primary key: a certificate chain is kilobytes, and a host may hold
	// a hundred thousand.
	type row struct{ DeploymentID, Name, Result string }
	var last row
	for {
		var rows []row
		if err := tx.Raw(`SELECT deployment_id, name, result FROM resources WHERE type = 'tls' AND (deployment_id > ? OR (deployment_id = ? AND name > ?))
			ORDER BY deployment_id, name LIMIT 500`, last.DeploymentID, last.DeploymentID, last.Name).Scan(&rows).Error; err != nil {
			return fmt.Errorf("reading the tls rows: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		for _, r := range rows {
			if at := renewAfter("tls", r.Result); at != nil {
				if err := tx.Exec(`UPDATE resources SET renew_after = ? WHERE deployment_id = ? AND name = ?`, *at, r.DeploymentID, r.Name).Error; err != nil {
					return fmt.Errorf("setting renew_after: %w", err)
				}
			}
		}
		last = rows[len(rows)-1]
	}
}

// DeploymentsByIDs returns the deployments of ids, newest first (the order of
// ListDeployments); an ID without a deployment is left out.
func (s *Store) DeploymentsByIDs(ctx context.Context, ids []string) ([]Deployment, error) {
	var out []Deployment
	for i := 0; i < len(ids); i += tickChunk {
		var part []Deployment
		if err := s.db.WithContext(ctx).Where("id IN ?", ids[i:min(i+tickChunk, len(ids))]).Find(&part).Error; err != nil {
			return nil, fmt.Errorf("reading deployments: %w", err)
		}
		out = append(out, part...)
	}
	sortNewestFirst(out)
	return out, nil
}

// sortNewestFirst orders deployments as ListDeployments does: created_at descending.
func sortNewestFirst(ds []Deployment) {
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].CreatedAt.After(ds[j].CreatedAt) })
}

// UpdateCandidates returns the active deployments whose update policy may submit
// revision newest: automatic or window, not at newest, not tried at newest. Nothing when
// newest is "".
func (s *Store) UpdateCandidates(ctx context.Context, newest string) ([]Deployment, error) {
	if newest == "" {
		return nil, nil
	}
	var out []Deployment
	err := s.db.WithContext(ctx).
		Where("state = ? AND update_policy IN ? AND catalog_revision <> ? AND last_auto_revision <> ?", "active", []string{"automatic", "window"}, newest, newest).
		Order("created_at DESC").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("reading the deployments an update may be due for: %w", err)
	}
	return out, nil
}

// DueCertificates returns the provisioned tls rows, with their results, whose
// renew_after is at or before t, of the deployments in states, by deployment and name.
func (s *Store) DueCertificates(ctx context.Context, t time.Time, states []string) ([]Resource, error) {
	var out []Resource
	err := s.db.WithContext(ctx).Raw(`SELECT r.deployment_id, r.name, r.app, r.type, r.provider, r.spec, r.result, r.state
		FROM resources r JOIN deployments d ON d.id = r.deployment_id
		WHERE r.type = 'tls' AND r.renew_after <= ? AND r.state = ? AND d.state IN ?
		ORDER BY r.deployment_id, r.name`, t.UTC(), ResourceProvisioned, states).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("reading the certificates due: %w", err)
	}
	return out, nil
}

// BackupCandidates returns the IDs of the deployments in states that a scheduled backup
// may be due for at their tick: those with a record whose schedule base (the later of
// since and last_attempt_at) is before its app's cutoff in cutoffs (the newest time the
// app's schedule fired), and with sweep those with a database of an app that has no
// backup record yet. An app of a record missing from cutoffs has every record read.
//
// The sweep reads every database (an anti-join of the postgresql rows with the records,
// linear in the databases: about 175 ms at 30,000 deployments), so the engine asks for it
// once an hour: a build writes the record of an app it gave a database and a backups
// bucket (deploy's recordBackups), and the sweep finds those no build recorded.
func (s *Store) BackupCandidates(ctx context.Context, states []string, cutoffs map[string]time.Time, sweep bool) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(ids []string) {
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	var ids []string
	if sweep {
		err := s.db.WithContext(ctx).Raw(`SELECT DISTINCT r.deployment_id FROM resources r JOIN deployments d ON d.id = r.deployment_id
			WHERE r.type = 'postgresql' AND r.state IN ? AND d.state IN ?
			AND NOT EXISTS (SELECT 1 FROM app_backups b WHERE b.deployment_id = r.deployment_id AND b.app = r.app)`,
			[]string{ResourceProvisioned, ResourceKept}, states).Scan(&ids).Error
		if err != nil {
			return nil, fmt.Errorf("reading the apps without a backup record: %w", err)
		}
		add(ids)
	}
	apps, err := s.BackedUpApps(ctx)
	if err != nil {
		return nil, err
	}
	for _, app := range apps {
		ids = nil
		q := `SELECT b.deployment_id FROM app_backups b JOIN deployments d ON d.id = b.deployment_id WHERE b.app = ? AND d.state IN ?`
		args := []any{app, states}
		if cut, ok := cutoffs[app]; ok {
			q += ` AND b.since < ? AND (b.last_attempt_at IS NULL OR b.last_attempt_at < ?)`
			args = append(args, cut.UTC(), cut.UTC())
		}
		if err := s.db.WithContext(ctx).Raw(q, args...).Scan(&ids).Error; err != nil {
			return nil, fmt.Errorf("reading the backups due of %s: %w", app, err)
		}
		add(ids)
	}
	return out, nil
}

// DrillCandidates returns the IDs of the deployments in states with an app backed up
// at least once whose last drill (or, before its first, the start of its backups) is at
// or before cutoff.
func (s *Store) DrillCandidates(ctx context.Context, states []string, cutoff time.Time) ([]string, error) {
	cutoff = cutoff.UTC().Truncate(time.Microsecond) // the columns hold microseconds: the same answer
	var ids []string
	err := s.db.WithContext(ctx).Raw(`SELECT DISTINCT b.deployment_id FROM app_backups b JOIN deployments d ON d.id = b.deployment_id
		WHERE d.state IN ? AND b.last_success_at IS NOT NULL AND b.since <= ? AND (b.last_drill_at IS NULL OR b.last_drill_at <= ?)`,
		states, cutoff, cutoff).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("reading the restore drills due: %w", err)
	}
	return ids, nil
}

// AppBackupsOf returns the backup records of the deployments of ids, by deployment and app.
func (s *Store) AppBackupsOf(ctx context.Context, ids []string) ([]AppBackup, error) {
	var out []AppBackup
	for i := 0; i < len(ids); i += tickChunk {
		var part []AppBackup
		if err := s.db.WithContext(ctx).Where("deployment_id IN ?", ids[i:min(i+tickChunk, len(ids))]).Order("deployment_id, app").Find(&part).Error; err != nil {
			return nil, fmt.Errorf("reading backup records: %w", err)
		}
		out = append(out, part...)
	}
	return out, nil
}

// ResourcesOfTypesOf is ResourcesOfTypes for the deployments of ids only.
func (s *Store) ResourcesOfTypesOf(ctx context.Context, ids []string, types ...string) ([]Resource, error) {
	var out []Resource
	for i := 0; i < len(ids); i += tickChunk {
		var part []Resource
		if err := s.db.WithContext(ctx).Select("deployment_id, name, app, type, provider, spec, state").
			Where("deployment_id IN ? AND type IN ?", ids[i:min(i+tickChunk, len(ids))], types).Order("deployment_id, name").Find(&part).Error; err != nil {
			return nil, fmt.Errorf("reading resources: %w", err)
		}
		out = append(out, part...)
	}
	return out, nil
}

// DeploymentsWithResource returns the deployments in state with a resource named name
// of no app (a host-wide resource, as the directory), newest first.
func (s *Store) DeploymentsWithResource(ctx context.Context, state, name string) ([]Deployment, error) {
	var out []Deployment
	err := s.db.WithContext(ctx).
		Where("state = ? AND id IN (SELECT deployment_id FROM resources WHERE name = ? AND app = '')", state, name).
		Order("created_at DESC").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("reading the deployments with %s: %w", name, err)
	}
	return out, nil
}

// BackedUpApps returns the apps with a backup record, each once, in order.
//
// It walks the index app_backups_last_attempt from one app to the next (the smallest app
// after the last one found, a few index probes for each app) instead of reading every
// record as SELECT DISTINCT does: neither PostgreSQL 15 nor SQLite skips through an
// index by itself, and a DISTINCT over the records was most of what the tick read at
// 100,000 deployments with nothing due.
func (s *Store) BackedUpApps(ctx context.Context) ([]string, error) {
	var apps []string
	if err := s.db.WithContext(ctx).Raw(`WITH RECURSIVE apps(app) AS (
			SELECT MIN(app) FROM app_backups
			UNION ALL
			SELECT (SELECT MIN(b.app) FROM app_backups b WHERE b.app > apps.app) FROM apps WHERE apps.app IS NOT NULL)
		SELECT app FROM apps WHERE app IS NOT NULL ORDER BY app`).Scan(&apps).Error; err != nil {
		return nil, fmt.Errorf("reading the apps backed up: %w", err)
	}
	return apps, nil
}
