package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// States of an export.
const (
	// ExportExported: the final snapshots are taken and their read-only keys work.
	ExportExported = "exported"
	// ExportConfirming: the target said the import is done; a revoke-export build takes
	// the keys back (retried by the scheduler's tick until it succeeds).
	ExportConfirming = "confirming"
	// ExportConfirmed: the target confirmed the import and the keys are revoked.
	ExportConfirmed = "confirmed"
	// ExportRevoked: the keys are revoked without a confirmation (expiry, or a resume
	// before the move).
	ExportRevoked = "revoked"
)

// Bounds of an export's strings.
const (
	maxExportApps   = 64
	maxExportString = 128
)

// ExportApp is one app's part of an export: its final snapshot and the name of the
// read-only key of its backups bucket.
type ExportApp struct {
	Snapshot string `json:"snapshot"`
	Key      string `json:"key"`
}

// Export is a deployment's export to another fedhost. The migration string itself is
// never stored: only the sha256 digest of its confirmation token.
type Export struct {
	ID           string `gorm:"primaryKey"`
	DeploymentID string
	TokenHash    string
	// Apps is the JSON of map[string]ExportApp.
	Apps      string
	State     string
	CreatedAt time.Time
	ExpiresAt time.Time
	UpdatedAt time.Time
}

// TableName keeps gorm from guessing the table of Export.
func (Export) TableName() string { return "exports" }

// AppsOf decodes the export's apps.
func (x Export) AppsOf() (map[string]ExportApp, error) {
	out := map[string]ExportApp{}
	if err := json.Unmarshal([]byte(x.Apps), &out); err != nil {
		return nil, fmt.Errorf("export %s: apps: %w", x.ID, err)
	}
	return out, nil
}

// CreateExport records an export in state ExportExported.
func (s *Store) CreateExport(ctx context.Context, id, deploymentID, tokenHash string, apps map[string]ExportApp, expiresAt time.Time) (Export, error) {
	if len(apps) > maxExportApps {
		return Export{}, fmt.Errorf("an export of %d apps: at most %d", len(apps), maxExportApps)
	}
	for name, a := range apps {
		if len(name) > maxExportString || len(a.Snapshot) > maxExportString || len(a.Key) > maxExportString {
			return Export{}, fmt.Errorf("an export's app, snapshot or key name is longer than %d bytes", maxExportString)
		}
	}
	if len(id) > maxExportString || len(tokenHash) > maxExportString {
		return Export{}, fmt.Errorf("an export's id or token digest is longer than %d bytes", maxExportString)
	}
	raw, err := json.Marshal(apps)
	if err != nil {
		return Export{}, err
	}
	t := now()
	x := Export{ID: id, DeploymentID: deploymentID, TokenHash: tokenHash, Apps: string(raw), State: ExportExported,
		CreatedAt: t, ExpiresAt: expiresAt.UTC().Truncate(time.Microsecond), UpdatedAt: t}
	if err := s.db.WithContext(ctx).Create(&x).Error; err != nil {
		if _, foreignKey := constraintViolation(err); foreignKey {
			return Export{}, fmt.Errorf("deployment %s: %w", deploymentID, ErrNotFound)
		}
		return Export{}, fmt.Errorf("recording an export: %w", err)
	}
	return x, nil
}

// GetExport returns an export by its id.
func (s *Store) GetExport(ctx context.Context, id string) (Export, error) {
	var x Export
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&x).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Export{}, fmt.Errorf("export: %w", ErrNotFound)
	}
	if err != nil {
		return Export{}, fmt.Errorf("reading an export: %w", err)
	}
	return x, nil
}

// LatestExport returns a deployment's newest export.
func (s *Store) LatestExport(ctx context.Context, deploymentID string) (Export, error) {
	var x Export
	err := s.db.WithContext(ctx).Where("deployment_id = ?", deploymentID).Order("created_at DESC").Take(&x).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Export{}, fmt.Errorf("export: %w", ErrNotFound)
	}
	if err != nil {
		return Export{}, fmt.Errorf("reading an export: %w", err)
	}
	return x, nil
}

// exportMoves are the transitions of an export's state.
var exportMoves = map[[2]string]bool{
	{ExportExported, ExportConfirming}:  true,
	{ExportConfirming, ExportConfirmed}: true,
	{ExportExported, ExportRevoked}:     true,
}

// FinishExport moves an export from state from to state to (exported to confirming,
// confirming to confirmed, exported to revoked) and reports whether this call did: it
// moves only an export still in state from, so of two at once, one wins.
func (s *Store) FinishExport(ctx context.Context, id, from, to string) (bool, error) {
	if !exportMoves[[2]string{from, to}] {
		return false, fmt.Errorf("an export does not go from %q to %q: exported goes to confirming or revoked, confirming to confirmed", bounded(from, 32), bounded(to, 32))
	}
	res := s.db.WithContext(ctx).Model(&Export{}).Where("id = ? AND state = ?", id, from).
		Updates(map[string]any{"state": to, "updated_at": now()})
	if res.Error != nil {
		return false, fmt.Errorf("recording the state of an export: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// DueExports returns the exports whose read-only keys are to be revoked: those confirming
// (a confirmation's revoke that has not succeeded yet), and those still exported whose
// expiry is before at; oldest expiry first.
func (s *Store) DueExports(ctx context.Context, at time.Time) ([]Export, error) {
	var out []Export
	err := s.db.WithContext(ctx).Where("state = ? OR (state = ? AND expires_at < ?)", ExportConfirming, ExportExported, at.UTC()).
		Order("expires_at").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("listing the exports to revoke: %w", err)
	}
	return out, nil
}
