package store

import (
	"context"
	"errors"

	"gorm.io/gorm"
)

// NamespaceTaken says whether a deployment, destroyed or not, has the namespace: an
// import checks it before it stores anything.
func (s *Store) NamespaceTaken(ctx context.Context, namespace string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&Deployment{}).Where("namespace = ?", namespace).Count(&n).Error
	return n > 0, err
}

// DomainTaken says whether another deployment not destroyed claims the domain, or one
// under or above it (the rule of a deploy's claim, checked without claiming).
func (s *Store) DomainTaken(ctx context.Context, domain string) (bool, error) {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return claimDomain(tx, "", domain) })
	if errors.Is(err, ErrDomainTaken) {
		return true, nil
	}
	return false, err
}
