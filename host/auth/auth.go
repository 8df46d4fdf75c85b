// Package auth keeps the operator accounts of the host: users with argon2id
// password hashes, browser sessions with a CSRF token each, and API tokens for
// scripts. Session ids and tokens are stored only as sha256 digests, and no
// password, session id or token ever reaches the audit trail or a log.
//
// Failed logins are limited in memory, per process: at most 5 per account and
// 20 per client address in 15 minutes. An unknown user costs the same hash
// computation and gets the same answer as a wrong password.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/store"
)

// Limits of sessions, tokens and logins.
const (
	SessionIdle       = 12 * time.Hour
	SessionLifetime   = 7 * 24 * time.Hour
	MaxTokenLifetime  = 365 * 24 * time.Hour
	AccountFailures   = 5
	ClientFailures    = 20
	FailureWindow     = 15 * time.Minute
	TokenPrefix       = "fh_"
	AdminName         = "admin"
	sessionTouchEvery = time.Minute
)

var (
	// ErrBadCredentials is the one answer to a wrong password, an unknown user
	// and a disabled user alike.
	ErrBadCredentials = errors.New("wrong user name or password")
	// ErrRateLimited answers a login while the account or the client address
	// has had too many failures.
	ErrRateLimited = errors.New("too many failed logins: wait 15 minutes and try again")
	// ErrNoSession answers a session id that is unknown, expired or ended.
	ErrNoSession = errors.New("no such session, or it has expired: log in again")
	// ErrBadToken answers an API token that is unknown, expired or whose owner is disabled.
	ErrBadToken = errors.New("API token unknown or expired: create a new one")
)

// namePattern keeps user names plain and unambiguous: lowercase, so "Admin"
// and "admin" cannot be two accounts.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]{0,63}$`)

// Recorder records audit events; *audit.Log is one.
type Recorder interface {
	Record(ctx context.Context, e audit.Event) error
}

// Options configure a Service.
type Options struct {
	// Audit records every change and every refused login; nil records nothing.
	Audit Recorder
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// Params of new password hashes; DefaultParams when zero.
	Params Params
}

// Service manages accounts, sessions and tokens. It is safe for concurrent use.
type Service struct {
	st     *store.Store
	audit  Recorder
	now    func() time.Time
	params Params
	// dummyHash is checked for unknown users, so they take as long as known ones.
	dummyHash string

	accounts, clients *limiter
}

// New returns a Service on st.
func New(st *store.Store, opts Options) *Service {
	s := &Service{st: st, audit: opts.Audit, now: opts.Now, params: opts.Params}
	if s.now == nil {
		s.now = time.Now
	}
	if s.params == (Params{}) {
		s.params = DefaultParams
	}
	s.dummyHash = HashPassword(rand.Text(), s.params)
	s.accounts = newLimiter(AccountFailures, FailureWindow)
	s.clients = newLimiter(ClientFailures, FailureWindow)
	return s
}

// User is an account, without its password hash.
type User struct {
	ID        string
	Name      string
	Superuser bool
	Disabled  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

func userOf(u store.User) User {
	return User{ID: u.ID, Name: u.Name, Superuser: u.Superuser, Disabled: u.Disabled, CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}
}

// clock returns now at the precision the store keeps.
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

func (s *Service) record(ctx context.Context, e audit.Event) error {
	if s.audit == nil {
		return nil
	}
	if err := s.audit.Record(ctx, e); err != nil {
		return fmt.Errorf("recording the audit event %s: %w", e.Action, err)
	}
	return nil
}

// recordResult records action on subject with the result of err: ok, invalid
// or error; reason is where it failed.
func (s *Service) recordResult(ctx context.Context, action, subject string, err error, reason string) error {
	e := audit.Event{Action: action, Subject: subject, Result: audit.ResultOK}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, ErrInvalidName):
		e.Result, e.Reason = audit.ResultInvalid, reason
	default:
		e.Result, e.Reason = audit.ResultError, reason
	}
	return errors.Join(err, s.record(ctx, e))
}

// ErrInvalidName is wrapped by CreateUser for a name that is not a valid user name.
var ErrInvalidName = errors.New("invalid user name")

// EnsureAdmin creates the superuser "admin" with a generated password when no
// user exists, and returns that password; it returns "" when users exist. The
// caller shows the password once, on the terminal only.
func (s *Service) EnsureAdmin(ctx context.Context) (string, error) {
	n, err := s.st.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	_, password, err := s.CreateUser(ctx, AdminName, true)
	if errors.Is(err, store.ErrConflict) {
		return "", nil // another fedhost process made it first
	}
	return password, err
}

// CreateUser creates a user with a generated password, which it returns.
func (s *Service) CreateUser(ctx context.Context, name string, superuser bool) (User, string, error) {
	if !namePattern.MatchString(name) {
		err := fmt.Errorf("user name: use 1 to 64 lowercase letters, digits and . _ @ -, starting with a letter or digit: %w", ErrInvalidName)
		return User{}, "", s.recordResult(ctx, "user.create", "", err, "name")
	}
	password := rand.Text()
	u, err := s.st.CreateUser(ctx, store.User{Name: name, PasswordHash: HashPassword(password, s.params), Superuser: superuser, CreatedAt: s.clock()})
	if err != nil {
		return User{}, "", s.recordResult(ctx, "user.create", "", err, "name")
	}
	if err := s.recordResult(ctx, "user.create", u.ID, nil, ""); err != nil {
		return User{}, "", err
	}
	return userOf(u), password, nil
}

// ResetPassword gives the user a new generated password, which it returns,
// and ends the user's sessions.
func (s *Service) ResetPassword(ctx context.Context, name string) (string, error) {
	password := rand.Text()
	hash := HashPassword(password, s.params)
	if err := s.change(ctx, "user.reset_password", name, store.UserChange{PasswordHash: &hash}); err != nil {
		return "", err
	}
	return password, nil
}

// Promote makes the user a superuser.
func (s *Service) Promote(ctx context.Context, name string) error {
	yes := true
	return s.change(ctx, "user.promote", name, store.UserChange{Superuser: &yes})
}

// SetDisabled disables a user, ending its sessions and refusing its tokens, or enables it again.
func (s *Service) SetDisabled(ctx context.Context, name string, disabled bool) error {
	action := "user.enable"
	if disabled {
		action = "user.disable"
	}
	return s.change(ctx, action, name, store.UserChange{Disabled: &disabled})
}

func (s *Service) change(ctx context.Context, action, name string, change store.UserChange) error {
	u, err := s.st.UserByName(ctx, name)
	if err != nil {
		return s.recordResult(ctx, action, "", err, "name")
	}
	err = s.st.UpdateUser(ctx, u.ID, change, s.clock())
	return s.recordResult(ctx, action, u.ID, err, "store")
}

// Users returns every user, by name.
func (s *Service) Users(ctx context.Context) ([]User, error) {
	users, err := s.st.Users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]User, len(users))
	for i, u := range users {
		out[i] = userOf(u)
	}
	return out, nil
}

// Authenticate checks a password login from clientIP. Every failure is
// ErrBadCredentials, after the same work whether the user exists or not, or
// ErrRateLimited while the account or the client address has had too many
// failures. A success clears the failures of the account.
func (s *Service) Authenticate(ctx context.Context, name, password, clientIP string) (User, error) {
	now := s.now()
	// The refusal of an unknown name is anonymous: the typed name may be a password.
	refuse := func(actor, reason string, err error) (User, error) {
		e := audit.Event{Actor: actor, Issuer: audit.IssuerPassword, Action: "user.login", Subject: actor, Result: audit.ResultDenied, Reason: reason, ClientIP: clientIP}
		return User{}, errors.Join(err, s.record(ctx, e))
	}
	if s.accounts.blocked(name, now) || (clientIP != "" && s.clients.blocked(clientIP, now)) {
		actor := ""
		if u, err := s.st.UserByName(ctx, name); err == nil {
			actor = u.ID
		}
		return refuse(actor, "rate limit", ErrRateLimited)
	}
	u, err := s.st.UserByName(ctx, name)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return User{}, err
	}
	hash := s.dummyHash
	if found {
		hash = u.PasswordHash
	}
	match, err := CheckPassword(hash, password)
	if err != nil {
		return User{}, fmt.Errorf("user %q: stored %w: reset the password", name, err)
	}
	if !found || !match || u.Disabled {
		s.accounts.fail(name, now)
		if clientIP != "" {
			s.clients.fail(clientIP, now)
		}
		if !found {
			return refuse("", "credentials", ErrBadCredentials)
		}
		reason := "credentials"
		if match {
			reason = "disabled"
		}
		return refuse(u.ID, reason, ErrBadCredentials)
	}
	s.accounts.reset(name)
	e := audit.Event{Actor: u.ID, Issuer: audit.IssuerPassword, Action: "user.login", Subject: u.ID, Result: audit.ResultOK, ClientIP: clientIP}
	if err := s.record(ctx, e); err != nil {
		return User{}, err
	}
	return userOf(u), nil
}

// NewSession is a session just begun: ID goes into the session cookie,
// CSRFToken into the pages' forms. Neither is shown again.
type NewSession struct {
	ID        string
	CSRFToken string
	ExpiresAt time.Time
}

// NewSession begins a session for a user who signed in with a password.
func (s *Service) NewSession(ctx context.Context, userID string) (NewSession, error) {
	return s.NewSessionBy(ctx, userID, audit.IssuerPassword)
}

// NewSessionBy begins a session for a user identified by issuer (password or oidc).
func (s *Service) NewSessionBy(ctx context.Context, userID string, issuer audit.Issuer) (NewSession, error) {
	now := s.clock()
	ns := NewSession{ID: randomString(), CSRFToken: randomString(), ExpiresAt: now.Add(SessionLifetime)}
	err := s.st.CreateSession(ctx, store.Session{IDHash: digest(ns.ID), UserID: userID, CSRFToken: ns.CSRFToken, CreatedAt: now, LastSeenAt: now, ExpiresAt: ns.ExpiresAt})
	e := audit.Event{Actor: userID, Issuer: issuer, Action: "session.create", Subject: userID, Result: audit.ResultOK}
	if err != nil {
		e.Result, e.Reason = audit.ResultError, "store"
		if errors.Is(err, store.ErrNotFound) {
			e.Result, e.Reason = audit.ResultInvalid, "user"
		}
	}
	if err := errors.Join(err, s.record(ctx, e)); err != nil {
		return NewSession{}, err
	}
	return ns, nil
}

// Session is a live session.
type Session struct {
	User      User
	CSRFToken string
	// ExpiresAt is the absolute end; the session also ends after SessionIdle unused.
	ExpiresAt time.Time
}

// Session returns the live session with the given id and records its use.
// An unknown, expired or ended session, or one of a disabled user, is ErrNoSession.
func (s *Service) Session(ctx context.Context, id string) (Session, error) {
	now := s.clock()
	h := digest(id)
	sess, err := s.st.SessionByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, err
	}
	if !now.Before(sess.ExpiresAt) || !now.Before(sess.LastSeenAt.Add(SessionIdle)) {
		if err := s.st.DeleteSession(ctx, h); err != nil {
			return Session{}, err
		}
		return Session{}, ErrNoSession
	}
	u, err := s.st.UserByID(ctx, sess.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.Disabled) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, err
	}
	// One write a minute per session is enough for a 12-hour idle limit.
	if now.Sub(sess.LastSeenAt) >= sessionTouchEvery {
		if err := s.st.TouchSession(ctx, h, now); err != nil {
			return Session{}, err
		}
	}
	return Session{User: userOf(u), CSRFToken: sess.CSRFToken, ExpiresAt: sess.ExpiresAt}, nil
}

// EndSession ends the session with the given id (a logout); an unknown id is not an error.
func (s *Service) EndSession(ctx context.Context, id string) error {
	h := digest(id)
	sess, err := s.st.SessionByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = s.st.DeleteSession(ctx, h)
	e := audit.Event{Actor: sess.UserID, Issuer: audit.IssuerSession, Action: "session.end", Subject: sess.UserID, Result: audit.ResultOK}
	if err != nil {
		e.Result, e.Reason = audit.ResultError, "store"
	}
	return errors.Join(err, s.record(ctx, e))
}

// Token is an API token as stored: its value is shown only once, by NewToken.
type Token struct {
	ID        string
	Name      string
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// NewToken creates an API token named name for the user, valid for lifetime
// (at most MaxTokenLifetime), and returns its value, "fh_" and 43 characters.
func (s *Service) NewToken(ctx context.Context, userID, name string, lifetime time.Duration) (string, Token, error) {
	if lifetime <= 0 || lifetime > MaxTokenLifetime {
		err := fmt.Errorf("token lifetime %s: give a lifetime between 1 second and 1 year (8760h)", lifetime)
		return "", Token{}, errors.Join(err, s.record(ctx, audit.Event{Action: "token.create", Subject: userID, Result: audit.ResultInvalid, Reason: "lifetime"}))
	}
	if name == "" || input.Text("token name", name, input.MaxName) != nil {
		err := &input.Error{Field: "token name", Problem: fmt.Sprintf("give 1 to %d bytes of printable text that say what the token is for", input.MaxName)}
		return "", Token{}, errors.Join(err, s.record(ctx, audit.Event{Action: "token.create", Subject: userID, Result: audit.ResultInvalid, Reason: "name"}))
	}
	now := s.clock()
	value := TokenPrefix + randomString()
	t, err := s.st.CreateAPIToken(ctx, store.APIToken{TokenHash: digest(value), Name: name, UserID: userID, CreatedAt: now, ExpiresAt: now.Add(lifetime)})
	if err != nil {
		result, reason := audit.ResultError, "store"
		if errors.Is(err, store.ErrNotFound) {
			result, reason = audit.ResultInvalid, "user"
		}
		return "", Token{}, errors.Join(err, s.record(ctx, audit.Event{Action: "token.create", Subject: userID, Result: result, Reason: reason}))
	}
	if err := s.record(ctx, audit.Event{Action: "token.create", Subject: t.ID, Result: audit.ResultOK}); err != nil {
		return "", Token{}, err
	}
	return value, Token{ID: t.ID, Name: t.Name, UserID: t.UserID, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}, nil
}

// TokenOwner returns the user an API token acts for. An unknown or expired
// token, or one of a disabled user, is ErrBadToken.
func (s *Service) TokenOwner(ctx context.Context, token string) (User, error) {
	t, err := s.st.APITokenByHash(ctx, digest(token))
	if errors.Is(err, store.ErrNotFound) {
		return User{}, ErrBadToken
	}
	if err != nil {
		return User{}, err
	}
	if !s.clock().Before(t.ExpiresAt) {
		return User{}, ErrBadToken
	}
	u, err := s.st.UserByID(ctx, t.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.Disabled) {
		return User{}, ErrBadToken
	}
	if err != nil {
		return User{}, err
	}
	return userOf(u), nil
}

// randomString returns 32 random bytes, base64url-encoded without padding.
func randomString() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails: crypto/rand panics rather than return an error
	return base64.RawURLEncoding.EncodeToString(b)
}

// digest is how session ids and tokens are stored: a sha256 suffices for 256
// random bits, where a slow hash would only slow every request.
func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
