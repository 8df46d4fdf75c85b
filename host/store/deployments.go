package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// GetDeployment returns the deployment with the given ID.
func (s *Store) GetDeployment(ctx context.Context, id string) (Deployment, error) {
	var d Deployment
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Deployment{}, fmt.Errorf("deployment %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Deployment{}, fmt.Errorf("reading deployment %s: %w", id, err)
	}
	return d, nil
}

// ClaimNodeHost records host as the one that runs the nodes of deployment id, unless
// another was recorded first, and returns the host recorded: of two claims at once, one
// wins.
func (s *Store) ClaimNodeHost(ctx context.Context, id, host string) (string, error) {
	db := s.db.WithContext(ctx)
	if err := db.Model(&Deployment{}).Where("id = ? AND node_host = ''", id).UpdateColumn("node_host", host).Error; err != nil {
		return "", fmt.Errorf("recording the node host of deployment %s: %w", id, err)
	}
	d, err := s.GetDeployment(ctx, id)
	if err != nil {
		return "", err
	}
	return d.NodeHost, nil
}

// ListDeployments returns the deployments of owner ("" for every owner), newest first.
func (s *Store) ListDeployments(ctx context.Context, owner string) ([]Deployment, error) {
	q := s.db.WithContext(ctx).Order("created_at DESC")
	if owner != "" {
		q = q.Where("owner = ?", owner)
	}
	var out []Deployment
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	return out, nil
}

// CountDeployments counts the deployments of owner that are not in state except.
func (s *Store) CountDeployments(ctx context.Context, owner, except string) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&Deployment{}).Where("owner = ? AND state <> ?", owner, except).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("counting deployments: %w", err)
	}
	return n, nil
}

// ListDeploymentsPage returns at most limit deployments of owner ("" for every owner),
// newest first, created before the deployment before ("" from the newest). IDs are
// UUIDv7, ordered as their creation.
func (s *Store) ListDeploymentsPage(ctx context.Context, owner, before string, limit int) ([]Deployment, error) {
	q := s.db.WithContext(ctx).Order("id DESC").Limit(limit)
	if owner != "" {
		q = q.Where("owner = ?", owner)
	}
	if before != "" {
		q = q.Where("id < ?", before)
	}
	var out []Deployment
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	return out, nil
}

// DeploymentSummary is a deployment as a list shows it.
type DeploymentSummary struct {
	ID, Namespace, Name, Owner, Domain, State string
	UpdatedAt                                 time.Time
}

// ListDeploymentSummaries is ListDeploymentsPage without configurations: the columns a
// list shows, read with database/sql rather than gorm's reflection, as lists are hot.
func (s *Store) ListDeploymentSummaries(ctx context.Context, owner, before string, limit int) ([]DeploymentSummary, error) {
	q := `SELECT id, namespace, name, owner, domain, state, updated_at FROM deployments WHERE 1 = 1`
	var args []any
	if owner != "" {
		q += ` AND owner = ` + s.placeholder(len(args)+1)
		args = append(args, owner)
	}
	if before != "" {
		q += ` AND id < ` + s.placeholder(len(args)+1)
		args = append(args, before)
	}
	q += ` ORDER BY id DESC LIMIT ` + s.placeholder(len(args)+1)
	args = append(args, limit)
	rows, err := s.gormDB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	defer rows.Close()
	out := make([]DeploymentSummary, 0, limit)
	for rows.Next() {
		var d DeploymentSummary
		if err := rows.Scan(&d.ID, &d.Namespace, &d.Name, &d.Owner, &d.Domain, &d.State, &d.UpdatedAt); err != nil {
			return nil, fmt.Errorf("listing deployments: %w", err)
		}
		d.UpdatedAt = d.UpdatedAt.UTC()
		out = append(out, d)
	}
	return out, rows.Err()
}

// DeploymentSummariesByID returns the summaries of the deployments with the given IDs, by
// ID; an unknown ID is left out. For pages that name the deployments of a few rows
// (builds, say) without reading every deployment.
func (s *Store) DeploymentSummariesByID(ctx context.Context, ids []string) (map[string]DeploymentSummary, error) {
	out := make(map[string]DeploymentSummary, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var list []DeploymentSummary
	err := s.db.WithContext(ctx).Model(&Deployment{}).Select("id", "namespace", "name", "owner", "domain", "state", "updated_at").
		Where("id IN ?", ids).Find(&list).Error
	if err != nil {
		return nil, fmt.Errorf("reading deployments: %w", err)
	}
	for _, d := range list {
		d.UpdatedAt = d.UpdatedAt.UTC()
		out[d.ID] = d
	}
	return out, nil
}

func (s *Store) placeholder(n int) string {
	if s.riverPgx != nil {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// UpdateDeployment writes the given columns of deployment id.
func (s *Store) UpdateDeployment(ctx context.Context, id string, columns map[string]any) error {
	columns["updated_at"] = now()
	res := s.db.WithContext(ctx).Model(&Deployment{}).Where("id = ?", id).Updates(columns)
	if res.Error != nil {
		return fmt.Errorf("updating deployment %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("deployment %s: %w", id, ErrNotFound)
	}
	return nil
}

// Submission is what a deploy build stores on its deployment, and the revision it builds.
type Submission struct {
	Config, SecretRefs, Domain string
	Revision                   string
	// Backup, when set, is the slot of the scheduled backup the build takes (its app and
	// scheduled time): taken with the build, or ErrSlotTaken and no build when another
	// scheduler took it.
	Backup *Slot
}

// SubmitBuild stores a queued build and, for a deploy, the deployment's new configuration,
// in one transaction, so a configuration is never stored without its build; a scheduled
// backup's slot (sub.Backup) is taken in that transaction too, and a taken one returns
// ErrSlotTaken.
func (s *Store) SubmitBuild(ctx context.Context, deploymentID, operation string, sub Submission) (Build, error) {
	b := Build{ID: newID(), DeploymentID: deploymentID, Operation: operation, Config: sub.Config, CatalogRevision: sub.Revision, State: BuildQueued}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if sub.Backup != nil {
			// First: a second scheduler waits here for the first one's transaction, and
			// then finds the slot taken rather than the deployment busy.
			if err := takeSlot(tx, deploymentID, SlotBackup, *sub.Backup, b.ID); err != nil {
				return err
			}
		}
		if operation == OperationDeploy {
			if err := claimDomain(tx, deploymentID, sub.Domain); err != nil {
				return err
			}
			res := tx.Model(&Deployment{}).Where("id = ?", deploymentID).
				Updates(map[string]any{"config": sub.Config, "secret_refs": sub.SecretRefs, "domain": sub.Domain, "updated_at": now()})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return fmt.Errorf("deployment %s: %w", deploymentID, ErrNotFound)
			}
		}
		return tx.Create(&b).Error
	})
	if errors.Is(err, ErrDomainTaken) || errors.Is(err, ErrSlotTaken) {
		return Build{}, err
	}
	if err != nil {
		unique, foreignKey := constraintViolation(err)
		if foreignKey {
			return Build{}, fmt.Errorf("deployment %s: %w", deploymentID, ErrNotFound)
		}
		if unique {
			return Build{}, fmt.Errorf("deployment %s has a build queued or running: %w", deploymentID, ErrConflict)
		}
		return Build{}, fmt.Errorf("storing a build of deployment %s: %w", deploymentID, err)
	}
	return b, nil
}

// ListBuilds returns the builds of a deployment, newest first, at most limit (0: all).
func (s *Store) ListBuilds(ctx context.Context, deploymentID string, limit int) ([]Build, error) {
	q := s.db.WithContext(ctx).Where("deployment_id = ?", deploymentID).Order("created_at DESC, id DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	var out []Build
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing the builds of deployment %s: %w", deploymentID, err)
	}
	return out, nil
}

// CountUnfinishedBuilds counts queued and running builds of every deployment.
func (s *Store) CountUnfinishedBuilds(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&Build{}).Where("state IN ?", []BuildState{BuildQueued, BuildRunning}).Count(&n).Error
	return n, err
}

// BusyDeployments returns the deployments with a queued or running build.
func (s *Store) BusyDeployments(ctx context.Context) (map[string]bool, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&Build{}).Where("state IN ?", []BuildState{BuildQueued, BuildRunning}).Distinct().Pluck("deployment_id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("reading the running builds: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// FailBuilds marks the given unfinished builds failed with reason.
func (s *Store) FailBuilds(ctx context.Context, ids []string, reason string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.db.WithContext(ctx).Model(&Build{}).
		Where("id IN ? AND state IN ?", ids, []BuildState{BuildQueued, BuildRunning}).
		Updates(map[string]any{"state": BuildFailed, "reason": reason, "finished_at": now()}).Error
}

// Resources returns the resources of a deployment, by name.
func (s *Store) Resources(ctx context.Context, deploymentID string) ([]Resource, error) {
	var out []Resource
	if err := s.db.WithContext(ctx).Where("deployment_id = ?", deploymentID).Order("name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("reading the resources of deployment %s: %w", deploymentID, err)
	}
	return out, nil
}

// PutResource inserts or replaces a resource.
func (s *Store) PutResource(ctx context.Context, r Resource) error {
	r.UpdatedAt = now()
	r.RenewAfter = renewAfter(r.Type, r.Result)
	if err := s.db.WithContext(ctx).Save(&r).Error; err != nil {
		return fmt.Errorf("recording resource %s of deployment %s: %w", r.Name, r.DeploymentID, err)
	}
	return nil
}

// DeleteResource forgets a resource.
func (s *Store) DeleteResource(ctx context.Context, deploymentID, name string) error {
	return s.db.WithContext(ctx).Where("deployment_id = ? AND name = ?", deploymentID, name).Delete(&Resource{}).Error
}

// ResourcesOfTypes returns the resources of the given types of every deployment, by
// deployment and name, with what says what they are (no result, no secrets).
func (s *Store) ResourcesOfTypes(ctx context.Context, types ...string) ([]Resource, error) {
	var out []Resource
	if err := s.db.WithContext(ctx).Select("deployment_id, name, app, type, provider, spec, state").Where("type IN ?", types).Order("deployment_id, name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("reading resources: %w", err)
	}
	return out, nil
}

// ResultsOfType returns the resources of type typ of every deployment with their
// results (which hold references to secrets, never their values), by deployment and name:
// the scheduler reads when each certificate is due from them.
func (s *Store) ResultsOfType(ctx context.Context, typ string) ([]Resource, error) {
	var out []Resource
	if err := s.db.WithContext(ctx).Select("deployment_id, name, app, type, provider, spec, result, state").Where("type = ?", typ).Order("deployment_id, name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("reading the %s resources: %w", typ, err)
	}
	return out, nil
}

// ExpiredRetained returns retained resources whose grace period ended before t.
func (s *Store) ExpiredRetained(ctx context.Context, t time.Time) ([]Resource, error) {
	var out []Resource
	err := s.db.WithContext(ctx).Where("state = ? AND retain_until < ?", ResourceRetained, t).Find(&out).Error
	return out, err
}

// ListAllBuilds returns the newest builds of every deployment, at most limit, without
// their configurations (Config is empty): the lists of jobs show none.
func (s *Store) ListAllBuilds(ctx context.Context, limit int) ([]Build, error) {
	return s.ListBuildsBefore(ctx, "", limit)
}

// ListBuildsBefore is ListAllBuilds from the build after the one with ID before (in
// the list's order, newest first): the next page. An unknown before gives none.
func (s *Store) ListBuildsBefore(ctx context.Context, before string, limit int) ([]Build, error) {
	q := s.db.WithContext(ctx).Omit("config")
	if before != "" {
		// Row values: the order's columns, through builds_created_at.
		q = q.Where("(created_at, id) < (SELECT created_at, id FROM builds WHERE id = ?)", before)
	}
	var out []Build
	if err := q.Order("created_at DESC, id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing builds: %w", err)
	}
	return out, nil
}

// SetBuildJob records the River job of a build.
func (s *Store) SetBuildJob(ctx context.Context, buildID string, jobID int64) error {
	return s.db.WithContext(ctx).Model(&Build{}).Where("id = ?", buildID).Update("job_id", jobID).Error
}

// EnsureRevision records a catalog revision unless it exists; revisions never change.
func (s *Store) EnsureRevision(ctx context.Context, r CatalogRevision) error {
	r.CreatedAt = now()
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&r).Error
	if err != nil {
		return fmt.Errorf("recording catalog revision %s: %w", r.ID, err)
	}
	return nil
}

// Revision returns a catalog revision.
func (s *Store) Revision(ctx context.Context, id string) (CatalogRevision, error) {
	var r CatalogRevision
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return r, fmt.Errorf("catalog revision %s: %w", id, ErrNotFound)
	}
	return r, err
}

// claimDomain refuses, inside the transaction of a deploy's submission, a domain that
// another deployment not destroyed has, or has under or above it: a deployment's domain is
// its claim, and a destroy releases it. On PostgreSQL a transaction-scoped advisory lock
// makes the check and the write one step across hosts; SQLite's write transactions
// (BEGIN IMMEDIATE) already are.
func claimDomain(tx *gorm.DB, deploymentID, domain string) error {
	if domain == "" {
		return nil
	}
	if tx.Dialector.Name() == "postgres" {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", domainClaimLock).Error; err != nil {
			return err
		}
	}
	var n int64
	err := tx.Model(&Deployment{}).
		Where("id <> ? AND state <> ? AND domain <> ''", deploymentID, "destroyed").
		Where("domain = ? OR domain LIKE ? OR ? LIKE '%.' || domain", domain, "%."+domain, domain).
		Count(&n).Error
	if err != nil {
		return err
	}
	if n > 0 {
		return ErrDomainTaken
	}
	return nil
}

// domainClaimLock is the key of the advisory lock that serializes domain claims.
const domainClaimLock = 0x66_68_64_6f_6d // "fhdom"
