package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Throttle is the policy of a login throttle (host/auth): after Free failures of a key,
// each further failure makes the key wait before its next try, Base the first time and
// twice as long each time after, up to Max. A key quiet for Window is forgotten.
type Throttle struct {
	Free      int
	Base, Max time.Duration
	Window    time.Duration
}

// DelayAfter is how long a key waits after n failures.
func (p Throttle) DelayAfter(n int) time.Duration {
	if n < p.Free {
		return 0
	}
	d := p.Base
	for i := p.Free; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// delaySQL is DelayAfter of the stored count, in microseconds, as SQL both databases
// run: the delays double from Base to Max in a few steps, so a CASE lists them all.
// It holds only integers of the policy, never input.
func (p Throttle) delaySQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CASE WHEN login_failures.failures < %d THEN 0", p.Free)
	n := p.Free
	for d := p.Base; d < p.Max; d *= 2 {
		fmt.Fprintf(&b, " WHEN login_failures.failures = %d THEN %d", n, d.Microseconds())
		n++
	}
	fmt.Fprintf(&b, " ELSE %d END", p.Max.Microseconds())
	return b.String()
}

// ChargeLoginFailure returns how long key must still wait before it may try at now,
// under policy p; when it need not wait, it counts the try as a failure at now, which
// ForgiveLoginFailure or ResetLoginFailures take back when the try succeeds. It is one
// upsert, so that hosts on one database share each key's count and two tries at once
// are both counted.
func (s *Store) ChargeLoginFailure(ctx context.Context, p Throttle, key string, at time.Time) (time.Duration, error) {
	delay := p.delaySQL()
	nowUS := at.UnixMicro()
	expired := "@now >= login_failures.last_failure_us + @window"
	waiting := "@now < login_failures.last_failure_us + " + delay
	var row struct {
		Failures      int
		LastFailureUs int64
		Refused       int
	}
	err := s.db.WithContext(ctx).Raw(`INSERT INTO login_failures (throttle_key, failures, last_failure_us, refused)
		VALUES (@key, 1, @now, 0)
		ON CONFLICT (throttle_key) DO UPDATE SET
			failures = CASE WHEN `+expired+` THEN 1 WHEN `+waiting+` THEN login_failures.failures ELSE login_failures.failures + 1 END,
			last_failure_us = CASE WHEN `+expired+` THEN @now WHEN `+waiting+` THEN login_failures.last_failure_us ELSE @now END,
			refused = CASE WHEN `+expired+` THEN 0 WHEN `+waiting+` THEN 1 ELSE 0 END
		RETURNING failures, last_failure_us, refused`,
		map[string]any{"key": key, "now": nowUS, "window": p.Window.Microseconds()}).Scan(&row).Error
	if err != nil {
		return 0, fmt.Errorf("counting a failed login: %w", err)
	}
	if row.Refused == 0 {
		return 0, nil
	}
	last := time.UnixMicro(row.LastFailureUs)
	return max(last.Add(p.DelayAfter(row.Failures)).Sub(at), time.Microsecond), nil
}

// ForgiveLoginFailure takes back one failure of key: a try charged that succeeded.
func (s *Store) ForgiveLoginFailure(ctx context.Context, key string) error {
	db := s.db.WithContext(ctx)
	if err := db.Exec(`UPDATE login_failures SET failures = failures - 1 WHERE throttle_key = ?`, key).Error; err != nil {
		return fmt.Errorf("forgiving a failed login: %w", err)
	}
	if err := db.Exec(`DELETE FROM login_failures WHERE throttle_key = ? AND failures <= 0`, key).Error; err != nil {
		return fmt.Errorf("forgiving a failed login: %w", err)
	}
	return nil
}

// ResetLoginFailures forgets the failures of key.
func (s *Store) ResetLoginFailures(ctx context.Context, key string) error {
	if err := s.db.WithContext(ctx).Exec(`DELETE FROM login_failures WHERE throttle_key = ?`, key).Error; err != nil {
		return fmt.Errorf("forgetting failed logins: %w", err)
	}
	return nil
}

// PurgeLoginFailures bounds the table a flood of distinct keys can fill: it forgets the
// keys quiet for window before at, and if more than maxKeys remain, the longest quiet.
func (s *Store) PurgeLoginFailures(ctx context.Context, window time.Duration, maxKeys int, at time.Time) error {
	db := s.db.WithContext(ctx)
	if err := db.Exec(`DELETE FROM login_failures WHERE last_failure_us <= ?`, at.Add(-window).UnixMicro()).Error; err != nil {
		return fmt.Errorf("forgetting old failed logins: %w", err)
	}
	err := db.Exec(`DELETE FROM login_failures WHERE last_failure_us <= (
		SELECT last_failure_us FROM login_failures ORDER BY last_failure_us DESC LIMIT 1 OFFSET ?)`, maxKeys).Error
	if err != nil {
		return fmt.Errorf("bounding the failed logins kept: %w", err)
	}
	return nil
}
