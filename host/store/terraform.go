package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// TerraformState is the Terraform state of one workspace (a tenant's instance of the
// terraform provider), sealed by the host, and the lock a run holds on it.
type TerraformState struct {
	Tenant   string `gorm:"primaryKey"`
	Instance string `gorm:"primaryKey"`
	// Sealed is the state encrypted by the host; "" before the first write.
	Sealed string
	// LockID is the ID of the lock Terraform took, "" when none is held; LockInfo the
	// lock's JSON as Terraform sent it, bounded by the API.
	LockID    string
	LockInfo  string
	LockedAt  *time.Time
	UpdatedAt time.Time
}

// ErrTerraformLocked is returned by the Terraform state calls when another lock than the
// caller's is held; the *TerraformLockedError it wraps names that lock.
var ErrTerraformLocked = errors.New("the terraform state is locked")

// TerraformLockedError carries the lock that is held.
type TerraformLockedError struct {
	ID, Info string
}

func (e *TerraformLockedError) Error() string {
	return ErrTerraformLocked.Error() + " (lock " + e.ID + ")"
}
func (e *TerraformLockedError) Unwrap() error { return ErrTerraformLocked }

// TerraformStateOf returns the state of a workspace; one never written wraps ErrNotFound.
func (s *Store) TerraformStateOf(ctx context.Context, tenant, instance string) (TerraformState, error) {
	var st TerraformState
	err := s.db.WithContext(ctx).Where("tenant = ? AND instance = ?", tenant, instance).Take(&st).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return TerraformState{}, fmt.Errorf("terraform state %s/%s: %w", tenant, instance, ErrNotFound)
	}
	if err != nil {
		return TerraformState{}, fmt.Errorf("reading the terraform state %s/%s: %w", tenant, instance, err)
	}
	return st, nil
}

// ensureTerraformState makes the workspace's row when it has none.
func ensureTerraformState(tx *gorm.DB, tenant, instance string) error {
	row := TerraformState{Tenant: tenant, Instance: instance, UpdatedAt: now()}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error
}

// heldLock reads the lock of a workspace after a conditional update changed nothing.
func heldLock(tx *gorm.DB, tenant, instance string) error {
	var st TerraformState
	if err := tx.Where("tenant = ? AND instance = ?", tenant, instance).Take(&st).Error; err != nil {
		return err
	}
	return &TerraformLockedError{ID: st.LockID, Info: st.LockInfo}
}

// PutTerraformState writes a workspace's sealed state. While a lock is held only a
// write naming it (lockID) passes; another gets a *TerraformLockedError.
func (s *Store) PutTerraformState(ctx context.Context, tenant, instance, sealed, lockID string) error {
	db := s.db.WithContext(ctx)
	if err := ensureTerraformState(db, tenant, instance); err != nil {
		return fmt.Errorf("writing the terraform state %s/%s: %w", tenant, instance, err)
	}
	res := db.Model(&TerraformState{}).
		Where("tenant = ? AND instance = ? AND (lock_id = '' OR lock_id = ?)", tenant, instance, lockID).
		Updates(map[string]any{"sealed": sealed, "updated_at": now()})
	if res.Error != nil {
		return fmt.Errorf("writing the terraform state %s/%s: %w", tenant, instance, res.Error)
	}
	if res.RowsAffected == 0 {
		return heldLock(db, tenant, instance)
	}
	return nil
}

// LockTerraformState takes the workspace's lock for id; a lock already held, by id or
// another, is a *TerraformLockedError naming it, as Terraform's http backend expects.
func (s *Store) LockTerraformState(ctx context.Context, tenant, instance, id, info string) error {
	db := s.db.WithContext(ctx)
	if err := ensureTerraformState(db, tenant, instance); err != nil {
		return fmt.Errorf("locking the terraform state %s/%s: %w", tenant, instance, err)
	}
	at := now()
	res := db.Model(&TerraformState{}).
		Where("tenant = ? AND instance = ? AND lock_id = ''", tenant, instance).
		Updates(map[string]any{"lock_id": id, "lock_info": info, "locked_at": at})
	if res.Error != nil {
		return fmt.Errorf("locking the terraform state %s/%s: %w", tenant, instance, res.Error)
	}
	if res.RowsAffected == 0 {
		return heldLock(db, tenant, instance)
	}
	return nil
}

// UnlockTerraformState releases the workspace's lock when it is id's; id "" releases
// whatever lock is held (terraform force-unlock). Unlocking a workspace that holds no
// lock is no error; another lock than id is a *TerraformLockedError.
func (s *Store) UnlockTerraformState(ctx context.Context, tenant, instance, id string) error {
	db := s.db.WithContext(ctx)
	q := db.Model(&TerraformState{}).Where("tenant = ? AND instance = ?", tenant, instance)
	if id != "" {
		q = q.Where("lock_id IN ('', ?)", id)
	}
	res := q.Updates(map[string]any{"lock_id": "", "lock_info": "", "locked_at": nil})
	if res.Error != nil {
		return fmt.Errorf("unlocking the terraform state %s/%s: %w", tenant, instance, res.Error)
	}
	if res.RowsAffected == 0 && id != "" {
		err := heldLock(db, tenant, instance)
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// DeleteTerraformState forgets a workspace's state; refused while another lock than
// lockID is held. Deleting one that is gone is no error.
func (s *Store) DeleteTerraformState(ctx context.Context, tenant, instance, lockID string) error {
	db := s.db.WithContext(ctx)
	res := db.Where("tenant = ? AND instance = ? AND (lock_id = '' OR lock_id = ?)", tenant, instance, lockID).Delete(&TerraformState{})
	if res.Error != nil {
		return fmt.Errorf("deleting the terraform state %s/%s: %w", tenant, instance, res.Error)
	}
	if res.RowsAffected == 0 {
		err := heldLock(db, tenant, instance)
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		return err
	}
	return nil
}
