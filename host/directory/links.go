package directory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"

	"github.com/fedhost/fedhost/host/store"
)

// DefaultLinkTTL is how long an invitation or reset link works by default.
const DefaultLinkTTL = 7 * 24 * time.Hour

// ErrBadLink is a link that is unknown, used already or expired.
var ErrBadLink = errors.New("this link is unknown, used already or expired: ask whoever manages your account for a new one")

// Links makes and uses the one-time links by which the users of deployments' directories
// set their password. A link's token is 32 random bytes; the store keeps only its sha256.
type Links struct {
	Store *store.Store
	// TTL is how long a link works (DefaultLinkTTL when 0).
	TTL time.Duration
}

// Issue makes a link for user of a deployment, replacing the user's earlier one, and
// returns its token, to be shown once; the expired links of every deployment are
// dropped on the way.
func (l Links) Issue(ctx context.Context, deploymentID, user, purpose, createdBy string) (string, time.Time, error) {
	now := time.Now()
	if _, err := l.Store.DeleteExpiredPasswordLinks(ctx, now); err != nil {
		return "", time.Time{}, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, err
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	ttl := l.TTL
	if ttl <= 0 {
		ttl = DefaultLinkTTL
	}
	link := store.PasswordLink{TokenHash: digest(token), DeploymentID: deploymentID, UserName: user, Purpose: purpose,
		CreatedBy: createdBy, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := l.Store.ReplacePasswordLink(ctx, link); err != nil {
		return "", time.Time{}, err
	}
	return token, link.ExpiresAt, nil
}

// Find returns the link of a token that still works, or ErrBadLink.
func (l Links) Find(ctx context.Context, token string) (store.PasswordLink, error) {
	if len(token) != 43 {
		return store.PasswordLink{}, ErrBadLink
	}
	link, err := l.Store.PasswordLinkByHash(ctx, digest(token))
	if errors.Is(err, store.ErrNotFound) || (err == nil && !time.Now().Before(link.ExpiresAt)) {
		return store.PasswordLink{}, ErrBadLink
	}
	return link, err
}

// Use sets the password of the link's user in dir (the link's deployment's directory)
// and uses the link up; when the directory fails, the link works again.
func (l Links) Use(ctx context.Context, link store.PasswordLink, dir *Directory, password string) error {
	if err := CheckPassword("password", password); err != nil {
		return err
	}
	took, err := l.Store.TakePasswordLink(ctx, link.TokenHash)
	if err != nil {
		return err
	}
	if !took {
		return ErrBadLink
	}
	if err := dir.SetPassword(link.UserName, password); err != nil {
		if restore := l.Store.ReplacePasswordLink(context.WithoutCancel(ctx), link); restore != nil {
			return errors.Join(err, restore)
		}
		return err
	}
	return nil
}

func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
