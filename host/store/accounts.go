package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// User is an operator account of the host.
type User struct {
	ID   string `gorm:"primaryKey"`
	Name string
	// PasswordHash is the argon2id hash in PHC string format; never the password.
	PasswordHash string
	Superuser    bool
	Disabled     bool
	// MustChangePassword is set on a generated password that someone else has seen (the
	// first start's, a reset's): the user must choose a new one before anything else.
	MustChangePassword bool
	CreatedAt          time.Time
	UpdatedAt          time.Time
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
	// LastUsedAt is when the token was last used, to the minute; nil if never.
	LastUsedAt *time.Time
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

// UserNames maps each of ids that names a user to the user's name, for a page that shows
// the owners of a few rows without reading every account.
func (s *Store) UserNames(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for i := 0; i < len(ids); i += tickChunk {
		var rows []struct{ ID, Name string }
		if err := s.db.WithContext(ctx).Model(&User{}).Select("id", "name").Where("id IN ?", ids[i:min(i+tickChunk, len(ids))]).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("reading user names: %w", err)
		}
		for _, r := range rows {
			out[r.ID] = r.Name
		}
	}
	return out, nil
}

// CountUsers returns how many users exist.
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&User{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("counting users: %w", err)
	}
	return n, nil
}

// ErrLastSuperuser is wrapped by UpdateUser and DeleteUser when the change would leave
// no active superuser, so that nobody could manage the accounts any more.
var ErrLastSuperuser = errors.New("it is the last active superuser")

// UserChange is what UpdateUser changes; nil fields stay as they are.
type UserChange struct {
	PasswordHash       *string
	Superuser          *bool
	Disabled           *bool
	MustChangePassword *bool
	// KeepSession is the digest of a session a new password hash leaves alive: the one
	// of the user who chose it.
	KeepSession string
	// EndTokens revokes every API token of the user (a reset: whoever had the old
	// password may have made some). Disabling the user always does.
	EndTokens bool
	// MayRemoveLastSuperuser lets the change demote the last active superuser: an
	// OpenID provider's groups decide who is one.
	MayRemoveLastSuperuser bool
}

// UpdateUser applies change to the user with the given ID at time at. A new
// password hash or disabling the user also ends the user's sessions (but
// KeepSession); disabling or EndTokens also revokes the user's API tokens. Demoting or
// disabling the last active superuser wraps ErrLastSuperuser and changes nothing.
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
	if change.MustChangePassword != nil {
		updates["must_change_password"] = *change.MustChangePassword
	}
	disabling := change.Disabled != nil && *change.Disabled
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if !change.MayRemoveLastSuperuser && (disabling || (change.Superuser != nil && !*change.Superuser)) {
			if err := lastSuperuser(tx, id); err != nil {
				return err
			}
		}
		res := tx.Model(&User{}).Where("id = ?", id).Updates(updates)
		if res.Error != nil {
			return fmt.Errorf("updating user %s: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("user %s: %w", id, ErrNotFound)
		}
		if change.PasswordHash != nil || disabling {
			if err := tx.Where("user_id = ? AND id_hash <> ?", id, change.KeepSession).Delete(&Session{}).Error; err != nil {
				return fmt.Errorf("ending the sessions of user %s: %w", id, err)
			}
		}
		if change.EndTokens || disabling {
			if err := tx.Where("user_id = ?", id).Delete(&APIToken{}).Error; err != nil {
				return fmt.Errorf("revoking the API tokens of user %s: %w", id, err)
			}
		}
		return nil
	})
}

// lastSuperuser wraps ErrLastSuperuser when user id is an active superuser and no other
// is. The active superusers are locked first (FOR UPDATE on PostgreSQL; SQLite's
// IMMEDIATE transaction holds the write lock already), so that two demotions at once
// cannot each leave the other as the last and then remove it.
func lastSuperuser(tx *gorm.DB, id string) error {
	var active []User
	q := tx.Where("superuser AND NOT disabled").Select("id")
	if tx.Dialector.Name() == "postgres" {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	if err := q.Find(&active).Error; err != nil {
		return fmt.Errorf("reading the active superusers: %w", err)
	}
	if len(active) == 1 && active[0].ID == id {
		return fmt.Errorf("user %s: %w", id, ErrLastSuperuser)
	}
	return nil
}

// ErrOwnsDeployments is wrapped by DeleteUser for a user who owns deployments that are
// not destroyed: they would be left without an owner who can manage them.
var ErrOwnsDeployments = errors.New("the user owns deployments that are not destroyed")

// DeleteUser removes the user with the given ID, its sessions and its API tokens. It
// refuses, wrapping ErrOwnsDeployments with their count, while the user owns a
// deployment that is not destroyed, and wraps ErrLastSuperuser for the last active
// superuser. Destroyed deployments keep the ID as their owner, for the history.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lastSuperuser(tx, id); err != nil {
			return err
		}
		var owned int64
		if err := tx.Model(&Deployment{}).Where("owner = ? AND state <> ?", id, "destroyed").Count(&owned).Error; err != nil {
			return fmt.Errorf("counting the deployments of user %s: %w", id, err)
		}
		if owned > 0 {
			return &OwnsDeploymentsError{Count: owned}
		}
		// Sessions and tokens go with the user: ON DELETE CASCADE.
		res := tx.Where("id = ?", id).Delete(&User{})
		if res.Error != nil {
			return fmt.Errorf("deleting user %s: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("user %s: %w", id, ErrNotFound)
		}
		return nil
	})
}

// OwnsDeploymentsError says how many deployments keep a user from being deleted.
type OwnsDeploymentsError struct{ Count int64 }

func (e *OwnsDeploymentsError) Error() string {
	return fmt.Sprintf("the user owns %d deployments that are not destroyed: destroy them first", e.Count)
}

// Unwrap makes errors.Is(err, ErrOwnsDeployments) hold.
func (e *OwnsDeploymentsError) Unwrap() error { return ErrOwnsDeployments }

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

// APITokensOfUser returns the API tokens of the user, oldest first, expired ones too.
func (s *Store) APITokensOfUser(ctx context.Context, userID string) ([]APIToken, error) {
	var out []APIToken
	if err := s.db.WithContext(ctx).Where("user_id = ?", userID).Order("created_at, id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing the API tokens of user %s: %w", userID, err)
	}
	return out, nil
}

// APITokenByID returns the token with the given ID.
func (s *Store) APITokenByID(ctx context.Context, id string) (APIToken, error) {
	var t APIToken
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return APIToken{}, fmt.Errorf("API token %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return APIToken{}, fmt.Errorf("reading API token %s: %w", id, err)
	}
	return t, nil
}

// DeleteAPIToken revokes the token with the given ID.
func (s *Store) DeleteAPIToken(ctx context.Context, id string) error {
	res := s.db.WithContext(ctx).Where("id = ?", id).Delete(&APIToken{})
	if res.Error != nil {
		return fmt.Errorf("revoking API token %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("API token %s: %w", id, ErrNotFound)
	}
	return nil
}

// TouchAPIToken records that the token was used at used.
func (s *Store) TouchAPIToken(ctx context.Context, id string, used time.Time) error {
	err := s.db.WithContext(ctx).Model(&APIToken{}).Where("id = ?", id).
		Update("last_used_at", used.UTC().Truncate(time.Microsecond)).Error
	if err != nil {
		return fmt.Errorf("recording the use of API token %s: %w", id, err)
	}
	return nil
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
