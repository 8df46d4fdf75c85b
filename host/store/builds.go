package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

var (
	// ErrNotFound is wrapped by errors about a record that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict is wrapped by errors about a record that clashes with
	// another, such as a namespace already taken.
	ErrConflict = errors.New("conflict")
	// ErrDomainTaken is wrapped by SubmitBuild when another deployment that is not
	// destroyed has the domain submitted, a domain under it or a domain above it.
	ErrDomainTaken = errors.New("the domain is taken")
	// ErrInvalid is wrapped by errors about a value the store does not accept, such as
	// a namespace that is not DNS-safe.
	ErrInvalid = errors.New("invalid")
	// ErrBuildFinished is wrapped by SetBuildState when the build is already
	// in a final state, which it never leaves.
	ErrBuildFinished = errors.New("build already finished")
)

// namespacePattern keeps a namespace usable as the prefix of database, role,
// bucket and DNS names: lowercase, starts with a letter, at most 24 characters
// so <namespace>-<name> fits the 63-character limits of those names.
var namespacePattern = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$`)

// CreateDeployment stores d with a new ID and returns it.
func (s *Store) CreateDeployment(ctx context.Context, d Deployment) (Deployment, error) {
	if !namespacePattern.MatchString(d.Namespace) {
		return Deployment{}, fmt.Errorf("namespace: use 1 to 24 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen: %w", ErrInvalid)
	}
	d.ID = newID()
	if err := s.db.WithContext(ctx).Create(&d).Error; err != nil {
		if unique, _ := constraintViolation(err); unique {
			return Deployment{}, fmt.Errorf("namespace %q is taken by another deployment: %w", d.Namespace, ErrConflict)
		}
		return Deployment{}, fmt.Errorf("creating deployment %q: %w", d.Namespace, err)
	}
	return d, nil
}

// CreateBuild stores a new queued build of the deployment and returns it.
func (s *Store) CreateBuild(ctx context.Context, deploymentID string) (Build, error) {
	b := Build{ID: newID(), DeploymentID: deploymentID, State: BuildQueued}
	if err := s.db.WithContext(ctx).Create(&b).Error; err != nil {
		unique, foreignKey := constraintViolation(err)
		if foreignKey {
			return Build{}, fmt.Errorf("deployment %s: %w", deploymentID, ErrNotFound)
		}
		if unique {
			return Build{}, fmt.Errorf("deployment %s has a build queued or running: %w", deploymentID, ErrConflict)
		}
		return Build{}, fmt.Errorf("creating a build of deployment %s: %w", deploymentID, err)
	}
	return b, nil
}

// GetBuild returns the build with the given ID.
func (s *Store) GetBuild(ctx context.Context, id string) (Build, error) {
	var b Build
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Build{}, fmt.Errorf("build %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Build{}, fmt.Errorf("reading build %s: %w", id, err)
	}
	return b, nil
}

// SetBuildState moves a build to state with reason. Running stamps StartedAt,
// queued clears both timestamps, a final state stamps FinishedAt. A build in a
// final state is left as it is and ErrBuildFinished is returned.
func (s *Store) SetBuildState(ctx context.Context, id string, state BuildState, reason string) error {
	if !state.valid() {
		return fmt.Errorf("build %s: unknown state %q", id, state)
	}
	updates := map[string]any{"state": state, "reason": reason}
	switch t := now(); {
	case state == BuildRunning:
		updates["started_at"], updates["finished_at"] = t, nil
	case state == BuildQueued:
		updates["started_at"], updates["finished_at"] = nil, nil
	default:
		updates["finished_at"] = t
	}
	res := s.db.WithContext(ctx).Model(&Build{}).
		Where("id = ? AND state NOT IN ?", id, []BuildState{BuildSucceeded, BuildFailed, BuildCanceled}).
		Updates(updates)
	if res.Error != nil {
		return fmt.Errorf("setting build %s %s: %w", id, state, res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	b, err := s.GetBuild(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("build %s is already %s: %w", id, b.State, ErrBuildFinished)
}

// AppendBuildEvent adds e at the end of its build's log, numbering it, and
// returns it. A zero Time is set to now.
func (s *Store) AppendBuildEvent(ctx context.Context, e BuildEvent) (BuildEvent, error) {
	if e.Time.IsZero() {
		e.Time = now()
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Locking the build serializes appenders on PostgreSQL; on SQLite the
		// IMMEDIATE transaction already does.
		var b Build
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Select("id").Where("id = ?", e.BuildID).Take(&b).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("build %s: %w", e.BuildID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := tx.Model(&BuildEvent{}).Where("build_id = ?", e.BuildID).
			Select("COALESCE(MAX(seq), 0) + 1").Scan(&e.Seq).Error; err != nil {
			return err
		}
		return tx.Create(&e).Error
	})
	if err != nil {
		return BuildEvent{}, fmt.Errorf("appending to the log of build %s: %w", e.BuildID, err)
	}
	return e, nil
}

// BuildEvents returns a build's log in order.
func (s *Store) BuildEvents(ctx context.Context, buildID string) ([]BuildEvent, error) {
	var events []BuildEvent
	if err := s.db.WithContext(ctx).Where("build_id = ?", buildID).Order("seq").Find(&events).Error; err != nil {
		return nil, fmt.Errorf("reading the log of build %s: %w", buildID, err)
	}
	return events, nil
}

// newID returns a UUIDv7: unique, and ordered by creation time, which keeps
// the primary key indexes of busy tables compact.
func newID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// constraintViolation tells a unique from a foreign key violation, on both
// databases.
func constraintViolation(err error) (unique, foreignKey bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505", pgErr.Code == "23503"
	}
	// modernc.org/sqlite errors carry the extended result code.
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		code := coded.Code()
		return code == 2067 || code == 1555, code == 787 // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY, _FOREIGNKEY
	}
	return false, false
}
