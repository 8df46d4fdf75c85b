package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// AuditEvent is one row of the audit trail. It holds no client address and no
// secret: Reason names where an error is, never a value.
type AuditEvent struct {
	// Seq numbers the events from 1 without gaps; a gap is a removed event.
	Seq          int64 `gorm:"primaryKey;autoIncrement:false"`
	Time         time.Time
	Actor        string
	Issuer       string
	Action       string
	DeploymentID string
	BuildID      string
	// Subject is what the action is on when it is neither a deployment nor a
	// build, e.g. the ID of a user or an API token.
	Subject   string
	RequestID string
	Result    string
	Reason    string
	// Count is how many calls the event stands for: more than 1 for the
	// summary of rate-limited anonymous refusals.
	Count int
	// PrevHash is the Hash of the event before, or the checkpoint's hash.
	PrevHash string
	Hash     string
}

// AuditChain is the state of the audit trail: its head, and the checkpoint
// left by the last prune, from which verification starts.
type AuditChain struct {
	ID         int `gorm:"primaryKey"`
	LastSeq    int64
	LastHash   string
	PrunedSeq  int64
	PrunedHash string
}

// TableName names the single-row table.
func (AuditChain) TableName() string { return "audit_chain" }

// AppendAuditEvent numbers e as the next event, links it to the event before,
// has seal compute its hash, and stores it. Appenders take turns on the row of
// the chain's head (FOR UPDATE on PostgreSQL, the IMMEDIATE transaction on
// SQLite), so concurrent appends from any number of processes form one chain.
func (s *Store) AppendAuditEvent(ctx context.Context, e AuditEvent, seal func(AuditEvent) string) (AuditEvent, error) {
	if e.Time.IsZero() {
		e.Time = now()
	}
	e.Time = e.Time.UTC().Truncate(time.Microsecond)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var head AuditChain
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = 1").Take(&head).Error; err != nil {
			return fmt.Errorf("reading the head of the chain: %w", err)
		}
		e.Seq = head.LastSeq + 1
		e.PrevHash = head.LastHash
		e.Hash = seal(e)
		if err := tx.Create(&e).Error; err != nil {
			return err
		}
		return tx.Model(&AuditChain{}).Where("id = 1").
			Updates(map[string]any{"last_seq": e.Seq, "last_hash": e.Hash}).Error
	})
	if err != nil {
		return AuditEvent{}, fmt.Errorf("appending audit event %s: %w", e.Action, err)
	}
	return e, nil
}

// AuditChainState returns the head and the checkpoint of the audit trail.
func (s *Store) AuditChainState(ctx context.Context) (AuditChain, error) {
	var c AuditChain
	if err := s.db.WithContext(ctx).Where("id = 1").Take(&c).Error; err != nil {
		return AuditChain{}, fmt.Errorf("reading the state of the audit chain: %w", err)
	}
	return c, nil
}

// AuditEvents returns at most limit events with a sequence above afterSeq, in order.
func (s *Store) AuditEvents(ctx context.Context, afterSeq int64, limit int) ([]AuditEvent, error) {
	var events []AuditEvent
	if err := s.db.WithContext(ctx).Where("seq > ?", afterSeq).Order("seq").Limit(limit).Find(&events).Error; err != nil {
		return nil, fmt.Errorf("reading audit events after %d: %w", afterSeq, err)
	}
	return events, nil
}

// UserAuditEvents returns the newest events by or about user (actor or subject), newest
// first, at most limit.
func (s *Store) UserAuditEvents(ctx context.Context, user string, limit int) ([]AuditEvent, error) {
	// As UserAuditEventsAfter reads, newest first.
	var events []AuditEvent
	if err := s.db.WithContext(ctx).Raw(`SELECT * FROM (SELECT * FROM audit_events WHERE actor = ? ORDER BY seq DESC LIMIT ?) AS by_actor
		UNION ALL SELECT * FROM (SELECT * FROM audit_events WHERE subject = ? AND subject <> '' AND actor <> ? ORDER BY seq DESC LIMIT ?) AS by_subject
		ORDER BY seq DESC LIMIT ?`, user, limit, user, user, limit, limit).Scan(&events).Error; err != nil {
		return nil, fmt.Errorf("reading the audit events of %s: %w", user, err)
	}
	return events, nil
}

// UserAuditEventsAfter returns at most limit events by or about user (actor or subject)
// with a sequence above afterSeq, in order.
func (s *Store) UserAuditEventsAfter(ctx context.Context, user string, afterSeq int64, limit int) ([]AuditEvent, error) {
	// One index scan each of actor and subject, merged: with the OR in one WHERE,
	// PostgreSQL walks the whole trail in seq order to fill the LIMIT. The subject part
	// says subject <> '', which the partial index audit_events_subject holds: most
	// events have no subject, so the generic plan of the prepared statement (the one
	// PostgreSQL keeps after five runs, planned without the user's value) guessed that
	// subject = $1 matches the whole trail and walked the primary key, every event at
	// each call. The parts are disjoint (the second leaves out the user's own acts), so
	// no UNION compares rows.
	var events []AuditEvent
	err := s.db.WithContext(ctx).Raw(`SELECT * FROM (SELECT * FROM audit_events WHERE actor = ? AND seq > ? ORDER BY seq LIMIT ?) AS by_actor
		UNION ALL SELECT * FROM (SELECT * FROM audit_events WHERE subject = ? AND subject <> '' AND actor <> ? AND seq > ? ORDER BY seq LIMIT ?) AS by_subject
		ORDER BY seq LIMIT ?`, user, afterSeq, limit, user, user, afterSeq, limit, limit).Scan(&events).Error
	if err != nil {
		return nil, fmt.Errorf("reading the audit events of %s after %d: %w", user, afterSeq, err)
	}
	return events, nil
}

// PruneAuditEvents removes the oldest events up to, not including, the first
// event at or after before, and makes the last removed event the checkpoint.
// Only a prefix of the chain is ever removed, so what stays is verifiable from
// the checkpoint even if clocks put some events out of order. It returns how
// many events it removed.
func (s *Store) PruneAuditEvents(ctx context.Context, before time.Time) (int64, error) {
	var removed int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var head AuditChain
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = 1").Take(&head).Error; err != nil {
			return fmt.Errorf("reading the head of the chain: %w", err)
		}
		// The first event to keep; without one, every event is older.
		var keep int64
		if err := tx.Model(&AuditEvent{}).Where("time >= ?", before.UTC()).
			Select("COALESCE(MIN(seq), ?)", head.LastSeq+1).Scan(&keep).Error; err != nil {
			return err
		}
		var last AuditEvent
		err := tx.Where("seq < ?", keep).Order("seq DESC").Limit(1).Find(&last).Error
		if err != nil || last.Seq == 0 {
			return err
		}
		res := tx.Where("seq <= ?", last.Seq).Delete(&AuditEvent{})
		if res.Error != nil {
			return res.Error
		}
		removed = res.RowsAffected
		return tx.Model(&AuditChain{}).Where("id = 1").
			Updates(map[string]any{"pruned_seq": last.Seq, "pruned_hash": last.Hash}).Error
	})
	if err != nil {
		return 0, fmt.Errorf("pruning audit events before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return removed, nil
}
