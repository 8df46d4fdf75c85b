package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Purposes of a password link.
const (
	LinkInvitation = "invitation"
	LinkReset      = "reset"
)

// PasswordLink is a one-time link by which a user of a deployment's directory sets their
// password. Only the sha256 digest of its token is kept; it is used once, before
// ExpiresAt.
type PasswordLink struct {
	TokenHash    string `gorm:"primaryKey"`
	DeploymentID string
	UserName     string
	// Purpose is LinkInvitation or LinkReset.
	Purpose   string
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// TableName keeps gorm from guessing the table of PasswordLink.
func (PasswordLink) TableName() string { return "password_links" }

// ReplacePasswordLink stores l and drops the user's earlier links: only the newest link
// of a user works.
func (s *Store) ReplacePasswordLink(ctx context.Context, l PasswordLink) error {
	l.CreatedAt, l.ExpiresAt = l.CreatedAt.UTC().Truncate(time.Microsecond), l.ExpiresAt.UTC().Truncate(time.Microsecond)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("deployment_id = ? AND user_name = ?", l.DeploymentID, l.UserName).Delete(&PasswordLink{}).Error; err != nil {
			return err
		}
		return tx.Create(&l).Error
	})
	if err != nil {
		if _, foreignKey := constraintViolation(err); foreignKey {
			return fmt.Errorf("deployment %s: %w", l.DeploymentID, ErrNotFound)
		}
		return fmt.Errorf("storing a password link: %w", err)
	}
	return nil
}

// PasswordLinkByHash returns the link whose token has the digest tokenHash, expired or not.
func (s *Store) PasswordLinkByHash(ctx context.Context, tokenHash string) (PasswordLink, error) {
	var l PasswordLink
	err := s.db.WithContext(ctx).Where("token_hash = ?", tokenHash).Take(&l).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return PasswordLink{}, fmt.Errorf("password link: %w", ErrNotFound)
	}
	if err != nil {
		return PasswordLink{}, fmt.Errorf("reading a password link: %w", err)
	}
	return l, nil
}

// TakePasswordLink deletes the link of tokenHash and reports whether this call did: of
// two uses at once, one wins.
func (s *Store) TakePasswordLink(ctx context.Context, tokenHash string) (bool, error) {
	res := s.db.WithContext(ctx).Where("token_hash = ?", tokenHash).Delete(&PasswordLink{})
	if res.Error != nil {
		return false, fmt.Errorf("using a password link: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// PendingPasswordLinks returns, by user name, the unexpired links of a deployment.
func (s *Store) PendingPasswordLinks(ctx context.Context, deploymentID string, at time.Time) (map[string]PasswordLink, error) {
	var ls []PasswordLink
	if err := s.db.WithContext(ctx).Where("deployment_id = ? AND expires_at > ?", deploymentID, at.UTC()).Find(&ls).Error; err != nil {
		return nil, fmt.Errorf("listing password links: %w", err)
	}
	out := make(map[string]PasswordLink, len(ls))
	for _, l := range ls {
		out[l.UserName] = l
	}
	return out, nil
}

// DeletePasswordLinks drops every link of a user of a deployment.
func (s *Store) DeletePasswordLinks(ctx context.Context, deploymentID, userName string) error {
	if err := s.db.WithContext(ctx).Where("deployment_id = ? AND user_name = ?", deploymentID, userName).Delete(&PasswordLink{}).Error; err != nil {
		return fmt.Errorf("dropping password links: %w", err)
	}
	return nil
}

// DeleteExpiredPasswordLinks drops the links that expired by at.
func (s *Store) DeleteExpiredPasswordLinks(ctx context.Context, at time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", at.UTC()).Delete(&PasswordLink{})
	if res.Error != nil {
		return 0, fmt.Errorf("dropping expired password links: %w", res.Error)
	}
	return res.RowsAffected, nil
}
