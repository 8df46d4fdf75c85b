package auth

import (
	"sync"
	"time"
)

// limiter counts failures per key in a sliding window, in memory: the limits
// hold per fedhost process and start afresh when it restarts. Several processes
// on one database each allow the limit, which still bounds guessing.
type limiter struct {
	max     int
	window  time.Duration
	maxKeys int

	mu       sync.Mutex
	failures map[string][]time.Time
}

func newLimiter(max int, window time.Duration) *limiter {
	return &limiter{max: max, window: window, maxKeys: 100000, failures: map[string][]time.Time{}}
}

// blocked reports whether key has had max failures within the window before now.
func (l *limiter) blocked(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recentLocked(key, now)) >= l.max
}

// fail records a failure of key at now.
func (l *limiter) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.recentLocked(key, now)
	if recent == nil && len(l.failures) >= l.maxKeys {
		l.evictLocked(now)
	}
	l.failures[key] = append(recent, now)
}

// reset forgets the failures of key.
func (l *limiter) reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, key)
}

// recentLocked drops the failures of key that left the window and returns the rest.
func (l *limiter) recentLocked(key string, now time.Time) []time.Time {
	times := l.failures[key]
	i := 0
	for i < len(times) && !times[i].After(now.Add(-l.window)) {
		i++
	}
	if i == len(times) {
		delete(l.failures, key)
		return nil
	}
	times = times[i:]
	l.failures[key] = times
	return times
}

// evictLocked bounds the memory a flood of distinct keys can take: it drops the
// keys whose failures left the window, and if that is not enough, arbitrary ones.
func (l *limiter) evictLocked(now time.Time) {
	for key := range l.failures {
		l.recentLocked(key, now)
	}
	for key := range l.failures {
		if len(l.failures) < l.maxKeys {
			return
		}
		delete(l.failures, key)
	}
}
