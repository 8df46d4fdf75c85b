package auth

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/fedhost/fedhost/host/store"
)

// throttle slows guessing with growing delays instead of a lock-out: after free
// failures of a key, each further failure makes the key wait before its next try,
// base the first time and twice as long each time after, up to max. A key's count
// is forgotten when it has not failed for window. The counts are in the store, so
// that every fedhost on one database slows the same guesses, and they outlive a
// restart.
type throttle struct {
	st     *store.Store
	policy store.Throttle
	// scope keeps the keys of two throttles apart in the one table.
	scope string

	mu         sync.Mutex
	lastPurge  time.Time
	maxKeys    int
	purgeEvery time.Duration
}

func newThrottle(st *store.Store, scope string, free int, base, max, window time.Duration) *throttle {
	return &throttle{st: st, scope: scope, policy: store.Throttle{Free: free, Base: base, Max: max, Window: window},
		maxKeys: 100000, purgeEvery: time.Minute}
}

// charge returns how long key must still wait before it may try at now; when it need
// not wait, it counts the try as a failure at now, which forgive or reset take back
// when the try succeeds.
func (t *throttle) charge(ctx context.Context, key string, now time.Time) (time.Duration, error) {
	if err := t.purge(ctx, now); err != nil {
		return 0, err
	}
	return t.st.ChargeLoginFailure(ctx, t.policy, t.scope+key, now)
}

// forgive takes back one failure of key: a try charged that succeeded.
func (t *throttle) forgive(ctx context.Context, key string) error {
	return t.st.ForgiveLoginFailure(ctx, t.scope+key)
}

// reset forgets the failures of key.
func (t *throttle) reset(ctx context.Context, key string) error {
	return t.st.ResetLoginFailures(ctx, t.scope+key)
}

// purge bounds the rows a flood of distinct keys can leave, at most once every
// purgeEvery per process.
func (t *throttle) purge(ctx context.Context, now time.Time) error {
	t.mu.Lock()
	due := now.Sub(t.lastPurge) >= t.purgeEvery
	if due {
		t.lastPurge = now
	}
	t.mu.Unlock()
	if !due {
		return nil
	}
	return t.st.PurgeLoginFailures(ctx, t.policy.Window, t.maxKeys, now)
}

// clientKey is the address failures are counted by: the address itself for IPv4, its
// /64 for IPv6, since one host or network usually holds a whole /64. What is not an
// address is kept only as a digest, so a key stays bounded.
func clientKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "?" + digest(ip)[:32]
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}
