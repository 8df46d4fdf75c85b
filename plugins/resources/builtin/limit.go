package main

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// failureLimiter counts failed sign-ins per key (a user name of a deployment, a client
// address) in token buckets: every failure spends a token, and a key with none left is
// refused until its bucket refills. Successful sign-ins spend nothing.
type failureLimiter struct {
	every time.Duration
	burst int
	max   int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newFailureLimiter(every time.Duration, burst, max int) *failureLimiter {
	return &failureLimiter{every: every, burst: burst, max: max, buckets: map[string]*rate.Limiter{}}
}

// blocked reports whether key has no failure left to spend at now.
func (l *failureLimiter) blocked(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	return ok && b.TokensAt(now) < 1
}

// fail spends one of key's failures.
func (l *failureLimiter) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			l.sweepLocked(now)
		}
		if len(l.buckets) >= l.max {
			// Full of keys still failing: the oldest do not matter more than the new one,
			// so the map stays bounded by dropping one at random.
			for k := range l.buckets {
				delete(l.buckets, k)
				break
			}
		}
		b = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.buckets[key] = b
	}
	b.AllowN(now, 1)
}

// sweep forgets the keys whose buckets are full again.
func (l *failureLimiter) sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
}

func (l *failureLimiter) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}
