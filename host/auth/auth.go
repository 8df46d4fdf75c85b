// Package auth keeps the operator accounts of the host: users with argon2id
// password hashes, browser sessions with a CSRF token each, and API tokens for
// scripts. Session ids and tokens are stored only as sha256 digests, and no
// password, session id or token ever reaches the audit trail or a log.
//
// Failed logins are slowed in memory, per process, with delays that double per
// failure of an (account, address) pair and of an address, never by locking the
// account: a right password from an address without failures always gets through.
// An unknown user costs the same hash computation and gets the same answer as a
// wrong password.
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
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/store"
)

// Limits of sessions, tokens and logins.
const (
	SessionIdle       = 12 * time.Hour
	SessionLifetime   = 7 * 24 * time.Hour
	MaxTokenLifetime  = 365 * 24 * time.Hour
	TokenPrefix       = "fh_"
	AdminName         = "admin"
	sessionTouchEvery = time.Minute
	tokenTouchEvery   = time.Minute
)

// The login throttle (docs/security.md): a pair of account and address, and an
// address across accounts, may fail this many times without waiting; each further
// failure makes it wait before its next try, FirstDelay the first time and twice as
// long each time after, up to MaxDelay. A pair or address that has not failed for
// FailureMemory is forgotten.
const (
	PairFailures   = 5
	ClientFailures = 20
	FirstDelay     = time.Second
	MaxDelay       = 15 * time.Minute
	FailureMemory  = time.Hour
)

// Bounds of a password an operator chooses.
const (
	MinPasswordLength = 12
	MaxPasswordLength = 256
)

var (
	// ErrBadCredentials is the one answer to a wrong password, an unknown user
	// and a disabled user alike.
	ErrBadCredentials = errors.New("wrong user name or password")
	// ErrRateLimited is wrapped by the *RateLimitedError that answers a login from an
	// address that has to wait after its failures.
	ErrRateLimited = errors.New("too many failed logins from this address")
	// ErrNoSession answers a session id that is unknown, expired or ended.
	ErrNoSession = errors.New("no such session, or it has expired: log in again")
	// ErrBadToken answers an API token that is unknown, expired or whose owner is disabled.
	ErrBadToken = errors.New("API token unknown or expired: create a new one")
)

// RateLimitedError refuses a login that came before its wait after earlier failures
// ended; errors.Is(err, ErrRateLimited) holds.
type RateLimitedError struct {
	// RetryAfter is how long the address must still wait, rounded up to a second.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%s: wait %s and try again", ErrRateLimited, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

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

	// pairs counts failures by account and address, clients by address.
	pairs, clients *throttle
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
	s.pairs = newThrottle(st, "pair ", PairFailures, FirstDelay, MaxDelay, FailureMemory)
	s.clients = newThrottle(st, "client ", ClientFailures, FirstDelay, MaxDelay, FailureMemory)
	return s
}

// User is an account, without its password hash.
type User struct {
	ID        string
	Name      string
	Superuser bool
	Disabled  bool
	// MustChangePassword: the user signed in with a generated password someone else has
	// seen, and must choose a new one before anything else.
	MustChangePassword bool
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

func userOf(u store.User) User {
	return User{ID: u.ID, Name: u.Name, Superuser: u.Superuser, Disabled: u.Disabled, MustChangePassword: u.MustChangePassword,
		CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}
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
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, ErrInvalidName),
		errors.Is(err, store.ErrLastSuperuser), errors.Is(err, store.ErrOwnsDeployments), errors.Is(err, ErrSelf):
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
// caller shows the password once, on the terminal only; the first sign-in with it
// must change it, as the terminal (or its scrollback, or a log of it) keeps it.
func (s *Service) EnsureAdmin(ctx context.Context) (string, error) {
	n, err := s.st.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	_, password, err := s.createUser(ctx, AdminName, true, true)
	if errors.Is(err, store.ErrConflict) {
		return "", nil // another fedhost process made it first
	}
	return password, err
}

// CreateUser creates a user with a generated password, which it returns.
func (s *Service) CreateUser(ctx context.Context, name string, superuser bool) (User, string, error) {
	return s.createUser(ctx, name, superuser, false)
}

func (s *Service) createUser(ctx context.Context, name string, superuser, mustChange bool) (User, string, error) {
	if !namePattern.MatchString(name) {
		// The name is not shown: it may be anything, of any length.
		err := fmt.Errorf("the user name: use 1 to 64 lowercase letters, digits and . _ @ -, starting with a letter or digit: %w", ErrInvalidName)
		return User{}, "", s.recordResult(ctx, "user.create", "", err, "name")
	}
	password := rand.Text()
	u, err := s.st.CreateUser(ctx, store.User{Name: name, PasswordHash: HashPassword(password, s.params), Superuser: superuser,
		MustChangePassword: mustChange, CreatedAt: s.clock()})
	if err != nil {
		return User{}, "", s.recordResult(ctx, "user.create", "", err, "name")
	}
	if err := s.recordResult(ctx, "user.create", u.ID, nil, ""); err != nil {
		return User{}, "", err
	}
	return userOf(u), password, nil
}

// ResetPassword gives the user a new generated password, which it returns, ends the
// user's sessions and revokes its API tokens (whoever knew the old password may have
// made some). The user must change the new password at the next sign-in: whoever
// passed it on has seen it.
func (s *Service) ResetPassword(ctx context.Context, name string) (string, error) {
	password := rand.Text()
	hash := HashPassword(password, s.params)
	yes := true
	if err := s.change(ctx, "user.reset_password", name, store.UserChange{PasswordHash: &hash, MustChangePassword: &yes, EndTokens: true}); err != nil {
		return "", err
	}
	return password, nil
}

// Promote makes the user a superuser.
func (s *Service) Promote(ctx context.Context, name string) error {
	yes := true
	return s.change(ctx, "user.promote", name, store.UserChange{Superuser: &yes})
}

// Demote makes a superuser an operator again; the last active superuser is refused
// (store.ErrLastSuperuser).
func (s *Service) Demote(ctx context.Context, name string) error {
	no := false
	return s.change(ctx, "user.demote", name, store.UserChange{Superuser: &no})
}

// SetDisabled disables a user, ending its sessions and revoking its tokens, or enables
// it again; the last active superuser cannot be disabled (store.ErrLastSuperuser).
func (s *Service) SetDisabled(ctx context.Context, name string, disabled bool) error {
	action := "user.enable"
	if disabled {
		action = "user.disable"
	}
	return s.change(ctx, action, name, store.UserChange{Disabled: &disabled})
}

// DeleteUser removes an account with its sessions and tokens. It refuses an account
// that owns deployments not destroyed (store.ErrOwnsDeployments, saying how many) and
// the last active superuser (store.ErrLastSuperuser).
func (s *Service) DeleteUser(ctx context.Context, name string) error {
	u, err := s.st.UserByName(ctx, name)
	if err != nil {
		return s.recordResult(ctx, "user.delete", "", err, "name")
	}
	reason := "store"
	err = s.st.DeleteUser(ctx, u.ID)
	switch {
	case errors.Is(err, store.ErrOwnsDeployments):
		reason = "deployments"
	case errors.Is(err, store.ErrLastSuperuser):
		reason = "last superuser"
	}
	return s.recordResult(ctx, "user.delete", u.ID, err, reason)
}

// ErrSelf is wrapped by the account changes a superuser may not make to its own account
// (disable, delete, demote) from a request that acts as that account: it would lock
// the caller out in the middle of what it is doing.
var ErrSelf = errors.New("you cannot do this to your own account: ask another superuser, or use the fedhost command on the host")

// Refuse returns the error a caller gets for an account change not attempted, such as
// ErrSelf, after recording it as action on the account name.
func (s *Service) Refuse(ctx context.Context, action, name string, err error) error {
	subject := ""
	if u, uerr := s.st.UserByName(ctx, name); uerr == nil {
		subject = u.ID
	}
	return s.recordResult(ctx, action, subject, err, "self")
}

func (s *Service) change(ctx context.Context, action, name string, change store.UserChange) error {
	u, err := s.st.UserByName(ctx, name)
	if err != nil {
		return s.recordResult(ctx, action, "", err, "name")
	}
	err = s.st.UpdateUser(ctx, u.ID, change, s.clock())
	reason := "store"
	if errors.Is(err, store.ErrLastSuperuser) {
		reason = "last superuser"
	}
	return s.recordResult(ctx, action, u.ID, err, reason)
}

// ErrWrongPassword answers a password change whose current password is wrong.
var ErrWrongPassword = errors.New("the current password is wrong: type the password you signed in with")

// PasswordError says why a new password is refused; it never holds the password.
type PasswordError struct{ Reason string }

func (e *PasswordError) Error() string { return "new password: " + e.Reason }

// ChangePassword sets the user's password to next after checking current, clears
// "must change password", and ends the user's other sessions: keepSession is the id
// of the session the change came from, "" for none. API tokens stay: the owner lists
// and revokes them separately (a token the provider made on the host's command line
// must keep working after the first-start password is changed). Wrong current
// passwords from clientIP are slowed as failed logins are (a *RateLimitedError), so
// that a stolen session cannot be used to guess the password.
func (s *Service) ChangePassword(ctx context.Context, userID, current, next, keepSession, clientIP string) error {
	const action = "user.change_password"
	u, err := s.st.UserByID(ctx, userID)
	if err != nil {
		return s.recordResult(ctx, action, userID, err, "user")
	}
	refuse := func(reason string, err error) error {
		return errors.Join(err, s.record(ctx, audit.Event{Action: action, Subject: u.ID, Result: audit.ResultInvalid, Reason: reason}))
	}
	pair := pairKey(u.Name, clientKey(clientIP))
	wait, err := s.pairs.charge(ctx, pair, s.now())
	if err != nil {
		return err
	}
	if wait > 0 {
		return errors.Join(&RateLimitedError{RetryAfter: (wait + time.Second - 1).Truncate(time.Second)},
			s.record(ctx, audit.Event{Action: action, Subject: u.ID, Result: audit.ResultDenied, Reason: "rate limit"}))
	}
	match, err := CheckPassword(u.PasswordHash, current)
	if err != nil {
		return fmt.Errorf("user %s: stored %w: ask for a password reset", u.Name, err)
	}
	if !match {
		return refuse("current password", ErrWrongPassword)
	}
	if err := s.pairs.reset(ctx, pair); err != nil {
		return err
	}
	switch n := utf8.RuneCountInString(next); {
	case n < MinPasswordLength:
		return refuse("new password", &PasswordError{Reason: fmt.Sprintf("use at least %d characters; a few words make a good one", MinPasswordLength)})
	case len(next) > MaxPasswordLength:
		return refuse("new password", &PasswordError{Reason: fmt.Sprintf("use at most %d bytes", MaxPasswordLength)})
	case next == current:
		return refuse("new password", &PasswordError{Reason: "choose a password other than the current one"})
	case strings.EqualFold(next, u.Name):
		return refuse("new password", &PasswordError{Reason: "choose a password other than your user name"})
	}
	hash := HashPassword(next, s.params)
	no := false
	keep := ""
	if keepSession != "" {
		keep = digest(keepSession)
	}
	err = s.st.UpdateUser(ctx, u.ID, store.UserChange{PasswordHash: &hash, MustChangePassword: &no, KeepSession: keep}, s.clock())
	return s.recordResult(ctx, action, u.ID, err, "store")
}

// UserNamed returns the user called name; an unknown name wraps store.ErrNotFound.
func (s *Service) UserNamed(ctx context.Context, name string) (User, error) {
	u, err := s.st.UserByName(ctx, name)
	if err != nil {
		return User{}, err
	}
	return userOf(u), nil
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
// ErrBadCredentials, after the same work whether the user exists or not, or a
// *RateLimitedError while the pair of name and address, or the address, must wait
// after its failures (docs/security.md). Only failures from the same address slow a
// login down: a right password from another address always gets through. A success
// clears the failures of the pair.
func (s *Service) Authenticate(ctx context.Context, name, password, clientIP string) (User, error) {
	now := s.now()
	// The refusal of an unknown name is anonymous: the typed name may be a password.
	refuse := func(actor, reason string, err error) (User, error) {
		e := audit.Event{Actor: actor, Issuer: audit.IssuerPassword, Action: "user.login", Subject: actor, Result: audit.ResultDenied, Reason: reason, ClientIP: clientIP}
		return User{}, errors.Join(err, s.record(ctx, e))
	}
	client := clientKey(clientIP)
	pair := pairKey(name, client)
	// The attempt is counted as a failure before the password is checked, so that
	// guesses sent at once cannot all pass while the first ones are being hashed.
	wait, err := s.pairs.charge(ctx, pair, now)
	if err != nil {
		return User{}, err
	}
	if wait == 0 {
		if wait, err = s.clients.charge(ctx, client, now); err != nil {
			return User{}, err
		}
		if wait > 0 {
			if err := s.pairs.forgive(ctx, pair); err != nil {
				return User{}, err
			}
		}
	}
	if wait > 0 {
		actor := ""
		if u, err := s.st.UserByName(ctx, name); err == nil {
			actor = u.ID
		}
		return refuse(actor, "rate limit", &RateLimitedError{RetryAfter: (wait + time.Second - 1).Truncate(time.Second)})
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
		if !found {
			return refuse("", "credentials", ErrBadCredentials)
		}
		reason := "credentials"
		if match {
			reason = "disabled"
		}
		return refuse(u.ID, reason, ErrBadCredentials)
	}
	if err := errors.Join(s.pairs.reset(ctx, pair), s.clients.forgive(ctx, client)); err != nil {
		return User{}, err
	}
	e := audit.Event{Actor: u.ID, Issuer: audit.IssuerPassword, Action: "user.login", Subject: u.ID, Result: audit.ResultOK, ClientIP: clientIP}
	if err := s.record(ctx, e); err != nil {
		return User{}, err
	}
	return userOf(u), nil
}

// pairKey is the throttle's key of an account name and a client key. The name is kept
// only as a digest: bounded, and a typed name may be a password.
func pairKey(name, client string) string { return digest(name)[:32] + " " + client }

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
	// LastUsedAt is when the token was last used, to the minute; nil if never.
	LastUsedAt *time.Time
}

func tokenOf(t store.APIToken) Token {
	return Token{ID: t.ID, Name: t.Name, UserID: t.UserID, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt}
}

// Tokens returns the API tokens of the user, oldest first, expired ones too; never
// their values, which are not kept.
func (s *Service) Tokens(ctx context.Context, userID string) ([]Token, error) {
	rows, err := s.st.APITokensOfUser(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]Token, len(rows))
	for i, t := range rows {
		out[i] = tokenOf(t)
	}
	return out, nil
}

// TokenByID returns the API token with the given ID.
func (s *Service) TokenByID(ctx context.Context, id string) (Token, error) {
	t, err := s.st.APITokenByID(ctx, id)
	if err != nil {
		return Token{}, err
	}
	return tokenOf(t), nil
}

// RevokeToken ends the API token with the given ID at once. Who may revoke it (its
// owner, a superuser) is the caller's to check.
func (s *Service) RevokeToken(ctx context.Context, id string) error {
	err := s.st.DeleteAPIToken(ctx, id)
	return s.recordResult(ctx, "token.revoke", id, err, "token")
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
	return value, tokenOf(t), nil
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
	now := s.clock()
	if !now.Before(t.ExpiresAt) {
		return User{}, ErrBadToken
	}
	u, err := s.st.UserByID(ctx, t.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.Disabled) {
		return User{}, ErrBadToken
	}
	if err != nil {
		return User{}, err
	}
	// One write a minute per token is enough to tell a token in use from a forgotten one.
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= tokenTouchEvery {
		if err := s.st.TouchAPIToken(ctx, t.ID, now); err != nil {
			return User{}, err
		}
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
