package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// User is an operator account of the host.
type User struct {
	ID   string `gorm:"primaryKey"`
	Name string
	// PasswordHash is the argon2id hash in PHC string format; never the password.
	PasswordHash string
	Superuser    bool
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Session is a browser login. Only the sha256 digest of its id is kept, so a
// reader of the database cannot take over a session.
type Session struct {
	IDHash     string `gorm:"primaryKey"`
	UserID     string
	CSRFToken  string
	CreatedAt  time.Time
	LastSeenAt time.Time
	// ExpiresAt is the absolute end of the session, however active it is.
	ExpiresAt time.Time
}

// APIToken is a credential for scripts. Only the sha256 digest of the token is kept.
type APIToken struct {
	ID        string `gorm:"primaryKey"`
	TokenHash string
	Name      string
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// TableName keeps gorm from guessing the table of APIToken.
func (APIToken) TableName() string { return "api_tokens" }

// CreateUser stores u with a new ID and returns it; a taken name wraps ErrConflict.
func (s *Store) CreateUser(ctx context.Context, u User) (User, error) {
	u.ID = newID()
	if u.CreatedAt.IsZero() {
		u.CreatedAt = now()
	}
	u.UpdatedAt = u.CreatedAt
	if err := s.db.WithContext(ctx).Create(&u).Error; err != nil {
		if unique, _ := constraintViolation(err); unique {
			return User{}, fmt.Errorf("this user name is taken: choose another: %w", ErrConflict)
		}
		return User{}, fmt.Errorf("creating user %q: %w", u.Name, err)
	}
	return u, nil
}

// UserByName returns the user called name.
func (s *Store) UserByName(ctx context.Context, name string) (User, error) {
	return s.user(ctx, "name = ?", name, fmt.Sprintf("user %q", name))
}

// UserByID returns the user with the given ID.
func (s *Store) UserByID(ctx context.Context, id string) (User, error) {
	return s.user(ctx, "id = ?", id, "user "+id)
}

func (s *Store) user(ctx context.Context, where, arg, what string) (User, error) {
	var u User
	err := s.db.WithContext(ctx).Where(where, arg).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return User{}, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("reading %s: %w", what, err)
	}
	return u, nil
}

// Users returns every user, by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	var users []User
	if err := s.db.WithContext(ctx).Order("name").Find(&users).Error; err != nil {
		return nil, fmt.Errorf("listing users: %w", err)
	}
	return users, nil
}

// CountUsers returns how many users exist.
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&User{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("counting users: %w", err)
	}
	return n, nil
}

// UserChange is what UpdateUser changes; nil fields stay as they are.
type UserChange struct {
	PasswordHash *string
	Superuser    *bool
	Disabled     *bool
}

// UpdateUser applies change to the user with the given ID at time at. A new
// password hash or disabling the user also ends all of the user's sessions.
func (s *Store) UpdateUser(ctx context.Context, id string, change UserChange, at time.Time) error {
	updates := map[string]any{"updated_at": at.UTC().Truncate(time.Microsecond)}
	if change.PasswordHash != nil {
		updates["password_hash"] = *change.PasswordHash
	}
	if change.Superuser != nil {
		updates["superuser"] = *change.Superuser
	}
	if change.Disabled != nil {
		updates["disabled"] = *change.Disabled
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&User{}).Where("id = ?", id).Updates(updates)
		if res.Error != nil {
			return fmt.Errorf("updating user %s: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("user %s: %w", id, ErrNotFound)
		}
		if change.PasswordHash != nil || (change.Disabled != nil && *change.Disabled) {
			if err := tx.Where("user_id = ?", id).Delete(&Session{}).Error; err != nil {
				return fmt.Errorf("ending the sessions of user %s: %w", id, err)
			}
		}
		return nil
	})
}

// CreateSession stores a new session.
func (s *Store) CreateSession(ctx context.Context, sess Session) error {
	if err := s.db.WithContext(ctx).Create(&sess).Error; err != nil {
		if _, foreignKey := constraintViolation(err); foreignKey {
			return fmt.Errorf("user %s: %w", sess.UserID, ErrNotFound)
		}
		return fmt.Errorf("creating a session of user %s: %w", sess.UserID, err)
	}
	return nil
}

// SessionByHash returns the session whose id has the digest idHash.
func (s *Store) SessionByHash(ctx context.Context, idHash string) (Session, error) {
	var sess Session
	err := s.db.WithContext(ctx).Where("id_hash = ?", idHash).Take(&sess).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Session{}, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("reading a session: %w", err)
	}
	return sess, nil
}

// TouchSession records that the session was used at seen.
func (s *Store) TouchSession(ctx context.Context, idHash string, seen time.Time) error {
	err := s.db.WithContext(ctx).Model(&Session{}).Where("id_hash = ?", idHash).
		Update("last_seen_at", seen.UTC().Truncate(time.Microsecond)).Error
	if err != nil {
		return fmt.Errorf("touching a session: %w", err)
	}
	return nil
}

// DeleteSession removes the session whose id has the digest idHash; a missing
// session is not an error.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	if err := s.db.WithContext(ctx).Where("id_hash = ?", idHash).Delete(&Session{}).Error; err != nil {
		return fmt.Errorf("deleting a session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions removes the sessions that ended before at, or were
// last seen before idleSince, and returns how many.
func (s *Store) DeleteExpiredSessions(ctx context.Context, at, idleSince time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ? OR last_seen_at <= ?", at.UTC(), idleSince.UTC()).Delete(&Session{})
	if res.Error != nil {
		return 0, fmt.Errorf("deleting expired sessions: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// CreateAPIToken stores t with a new ID and returns it.
func (s *Store) CreateAPIToken(ctx context.Context, t APIToken) (APIToken, error) {
	t.ID = newID()
	if err := s.db.WithContext(ctx).Create(&t).Error; err != nil {
		if _, foreignKey := constraintViolation(err); foreignKey {
			return APIToken{}, fmt.Errorf("user %s: %w", t.UserID, ErrNotFound)
		}
		return APIToken{}, fmt.Errorf("creating API token %q: %w", t.Name, err)
	}
	return t, nil
}

// APITokenByHash returns the token whose value has the digest tokenHash.
func (s *Store) APITokenByHash(ctx context.Context, tokenHash string) (APIToken, error) {
	var t APIToken
	err := s.db.WithContext(ctx).Where("token_hash = ?", tokenHash).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return APIToken{}, fmt.Errorf("API token: %w", ErrNotFound)
	}
	if err != nil {
		return APIToken{}, fmt.Errorf("reading an API token: %w", err)
	}
	return t, nil
}
