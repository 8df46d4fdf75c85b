package auth

import (
	"net/netip"
	"sync"
	"time"
)

// throttle slows guessing with growing delays instead of a lock-out: after free
// failures of a key, each further failure makes the key wait before its next try,
// base the first time and twice as long each time after, up to max. A key's count
// is forgotten when it has not failed for window. The counts are in memory: they
// hold per fedhost process and start afresh when it restarts; several processes on
// one database each allow as much, which still bounds guessing.
type throttle struct {
	free      int
	base, max time.Duration
	window    time.Duration
	maxKeys   int

	mu      sync.Mutex
	entries map[string]*failures
}

type failures struct {
	count int
	last  time.Time
}

func newThrottle(free int, base, max, window time.Duration) *throttle {
	return &throttle{free: free, base: base, max: max, window: window, maxKeys: 100000, entries: map[string]*failures{}}
}

// delayAfter is how long a key waits after n failures.
func (t *throttle) delayAfter(n int) time.Duration {
	if n < t.free {
		return 0
	}
	d := t.base
	for i := t.free; i < n && d < t.max; i++ {
		d *= 2
	}
	return min(d, t.max)
}

// charge returns how long key must still wait before it may try at now; when it need
// not wait, it counts the try as a failure at now, which forgive or reset take back
// when the try succeeds.
func (t *throttle) charge(key string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.liveLocked(key, now)
	if f != nil {
		if wait := f.last.Add(t.delayAfter(f.count)).Sub(now); wait > 0 {
			return wait
		}
	} else {
		if len(t.entries) >= t.maxKeys {
			t.evictLocked(now)
		}
		f = &failures{}
		t.entries[key] = f
	}
	f.count++
	f.last = now
	return 0
}

// forgive takes back one failure of key: a try charged that succeeded.
func (t *throttle) forgive(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.entries[key]; f != nil {
		if f.count--; f.count <= 0 {
			delete(t.entries, key)
		}
	}
}

// reset forgets the failures of key.
func (t *throttle) reset(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}

// liveLocked returns the failures of key, forgetting them when the key has been quiet
// for the window.
func (t *throttle) liveLocked(key string, now time.Time) *failures {
	f := t.entries[key]
	if f != nil && !now.Before(f.last.Add(t.window)) {
		delete(t.entries, key)
		return nil
	}
	return f
}

// evictLocked bounds the memory a flood of distinct keys can take: it drops the keys
// that have been quiet for the window, and if that is not enough, arbitrary ones.
func (t *throttle) evictLocked(now time.Time) {
	for key := range t.entries {
		t.liveLocked(key, now)
	}
	for key := range t.entries {
		if len(t.entries) < t.maxKeys {
			return
		}
		delete(t.entries, key)
	}
}

// clientKey is the address failures are counted by: the address itself for IPv4, its
// /64 for IPv6, since one host or network usually holds a whole /64.
func clientKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}
