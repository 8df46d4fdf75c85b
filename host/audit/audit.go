package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fedhost/fedhost/host/store"
)

// Issuer says how the actor of an event was identified.
type Issuer string

// The issuers of an actor. An anonymous event has none.
const (
	IssuerPassword  Issuer = "password"
	IssuerSession   Issuer = "session"
	IssuerToken     Issuer = "token"
	IssuerOIDC      Issuer = "oidc"
	IssuerScheduler Issuer = "scheduler"
	IssuerSystem    Issuer = "system"
)

// Result is how a call ended.
type Result string

// The results of a call. Every result but ResultOK is a refusal or a failure.
const (
	ResultOK      Result = "ok"
	ResultDenied  Result = "denied"
	ResultInvalid Result = "invalid"
	ResultError   Result = "error"
)

// Limits of the free-text fields, so a caller cannot store a long text.
const (
	maxRequestID = 128
	maxReason    = 256
)

// DefaultRetention is how long events are kept unless configured otherwise.
const DefaultRetention = 365 * 24 * time.Hour

// Event is one call to record.
type Event struct {
	// Time is when the call happened; zero means now.
	Time time.Time
	// Actor is the ID of the account (or the name of the component) that made
	// the call; empty for a caller without a login.
	Actor  string
	Issuer Issuer
	// Action names what was called, e.g. deployment.submit.
	Action       string
	DeploymentID string
	BuildID      string
	// Subject is what the action is on when it is neither a deployment nor a
	// build: the ID of a user or of an API token.
	Subject   string
	RequestID string
	Result    Result
	// Reason says why a call was refused or failed: the location of the error
	// (a JSON pointer, a step), never a value.
	Reason string
	// ClientIP is used only to rate-limit anonymous refusals; it is not stored.
	ClientIP string
}

// Actor is who makes the calls of a context: the HTTP layer puts the
// authenticated caller there, so every package below records it alike.
type Actor struct {
	ID        string
	Issuer    Issuer
	RequestID string
	ClientIP  string
}

type actorKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries, or the zero Actor (anonymous).
func ActorFrom(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}

// Options tune a Log.
type Options struct {
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// AnonymousWindow is the interval in which only the first anonymous
	// refusal per action and client address is recorded; 300 s by default.
	AnonymousWindow time.Duration
	// MaxAnonymousClients bounds the client addresses tracked at once (10000
	// by default); beyond it the refusals of new addresses share one count.
	MaxAnonymousClients int
}

// Log records events to the store. It is safe for concurrent use. Call Flush
// before the process exits, so the counts of anonymous refusals are recorded.
type Log struct {
	st      *store.Store
	now     func() time.Time
	window  time.Duration
	maxKeys int

	mu      sync.Mutex
	pending map[anonKey]*anonWindow
}

type anonKey struct{ action, clientIP string }

// anonWindow is the anonymous refusals of one key since start: the first was
// recorded, count more are not yet.
type anonWindow struct {
	start time.Time
	first Event
	count int
}

// New returns a Log that records to st.
func New(st *store.Store, opts Options) *Log {
	l := &Log{st: st, now: opts.Now, window: opts.AnonymousWindow, maxKeys: opts.MaxAnonymousClients, pending: map[anonKey]*anonWindow{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.window <= 0 {
		l.window = 300 * time.Second
	}
	if l.maxKeys <= 0 {
		l.maxKeys = 10000
	}
	return l
}

// Record stores e. Actor, issuer, request id and client address come from ctx
// (WithActor) when e has none. The first anonymous refusal per action and client
// address in a window is stored; later ones in the window are counted, and
// stored as one event with their count when the window has ended, at the next
// call of Record, Sweep or Flush.
func (l *Log) Record(ctx context.Context, e Event) error {
	a := ActorFrom(ctx)
	if e.Actor == "" && e.Issuer == "" {
		e.Actor, e.Issuer = a.ID, a.Issuer
	}
	if e.RequestID == "" {
		e.RequestID = a.RequestID
	}
	if e.ClientIP == "" {
		e.ClientIP = a.ClientIP
	}
	if err := e.check(); err != nil {
		return err
	}
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	e.RequestID = cut(e.RequestID, maxRequestID)
	e.Reason = cut(e.Reason, maxReason)

	l.mu.Lock()
	due := l.endedLocked(e.Time)
	store := true
	if e.Actor == "" && e.Result != ResultOK {
		key := anonKey{e.Action, e.ClientIP}
		if _, ok := l.pending[key]; !ok && len(l.pending) >= l.maxKeys {
			key.clientIP = "" // over the bound: new addresses share one count
		}
		if w, ok := l.pending[key]; ok {
			w.count++
			store = false
		} else {
			l.pending[key] = &anonWindow{start: e.Time, first: e}
		}
	}
	l.mu.Unlock()

	if err := l.append(ctx, due...); err != nil {
		return err
	}
	if !store {
		return nil
	}
	return l.append(ctx, toRow(e, 1))
}

func (e Event) check() error {
	if e.Action == "" {
		return errors.New("audit event: action is empty")
	}
	switch e.Result {
	case ResultOK, ResultDenied, ResultInvalid, ResultError:
	default:
		return fmt.Errorf("audit event %s: unknown result %q", e.Action, e.Result)
	}
	switch e.Issuer {
	case "", IssuerPassword, IssuerSession, IssuerToken, IssuerOIDC, IssuerScheduler, IssuerSystem:
	default:
		return fmt.Errorf("audit event %s: unknown issuer %q", e.Action, e.Issuer)
	}
	if e.Actor != "" && e.Issuer == "" {
		return fmt.Errorf("audit event %s: an actor needs an issuer", e.Action)
	}
	return nil
}

// Sweep stores the counts of the anonymous refusals whose window has ended.
// Record sweeps too; call Sweep now and then when refusals are rare.
func (l *Log) Sweep(ctx context.Context) error {
	l.mu.Lock()
	due := l.endedLocked(l.now())
	l.mu.Unlock()
	return l.append(ctx, due...)
}

// Flush stores the counts of every window, ended or not, and forgets the
// windows. Call it on shutdown: nothing counted is lost.
func (l *Log) Flush(ctx context.Context) error {
	at := l.now()
	var due []store.AuditEvent
	l.mu.Lock()
	for key, w := range l.pending {
		if w.count > 0 {
			due = append(due, summary(w, at))
		}
		delete(l.pending, key)
	}
	l.mu.Unlock()
	return l.append(ctx, due...)
}

// endedLocked removes the windows that ended by at and returns the summaries to store.
func (l *Log) endedLocked(at time.Time) []store.AuditEvent {
	var due []store.AuditEvent
	for key, w := range l.pending {
		end := w.start.Add(l.window)
		if at.Before(end) {
			continue
		}
		if w.count > 0 {
			due = append(due, summary(w, end))
		}
		delete(l.pending, key)
	}
	return due
}

// summary is the event that stands for the refusals a window counted.
func summary(w *anonWindow, at time.Time) store.AuditEvent {
	e := w.first
	e.Time, e.RequestID = at, ""
	return toRow(e, w.count)
}

func toRow(e Event, count int) store.AuditEvent {
	return store.AuditEvent{
		Time: e.Time, Actor: e.Actor, Issuer: string(e.Issuer), Action: e.Action,
		DeploymentID: e.DeploymentID, BuildID: e.BuildID, Subject: e.Subject, RequestID: e.RequestID,
		Result: string(e.Result), Reason: e.Reason, Count: count,
	}
}

func (l *Log) append(ctx context.Context, rows ...store.AuditEvent) error {
	for _, r := range rows {
		if _, err := l.st.AppendAuditEvent(ctx, r, Hash); err != nil {
			return err
		}
	}
	return nil
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Prune removes the events recorded before before, keeping the chain
// verifiable from a checkpoint. It first verifies the chain and refuses to prune
// a broken one, so a retention sweep never erases the evidence of a change.
func (l *Log) Prune(ctx context.Context, before time.Time) (int64, error) {
	if _, err := l.Verify(ctx); err != nil {
		return 0, fmt.Errorf("not pruning the audit events: %w", err)
	}
	return l.st.PruneAuditEvents(ctx, before)
}

// PruneRetention removes the events older than retention; 0 keeps all.
func (l *Log) PruneRetention(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, nil
	}
	return l.Prune(ctx, l.now().Add(-retention))
}
