package main

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Refused log-ins are limited per client address: maxFailures at once, then one every
// failureEvery. Passwords are 256-bit random, so this is not what keeps them from being
// guessed; it keeps a client that loops on a wrong password from costing the relay and
// filling its log.
const (
	maxFailures    = 10
	failureEvery   = 6 * time.Second
	maxLimitedHost = 10000
)

type loginLimiter struct {
	mu    sync.Mutex
	hosts map[string]*rate.Limiter
}

func newLoginLimiter() *loginLimiter { return &loginLimiter{hosts: map[string]*rate.Limiter{}} }

// blocked reports whether the address has no refused log-in left.
func (l *loginLimiter) blocked(remote string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.hosts[host(remote)]
	return ok && lim.Tokens() < 1
}

// failed counts a refused log-in of the address.
func (l *loginLimiter) failed(remote string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := host(remote)
	lim, ok := l.hosts[h]
	if !ok {
		if len(l.hosts) >= maxLimitedHost {
			l.prune()
		}
		lim = rate.NewLimiter(rate.Every(failureEvery), maxFailures)
		l.hosts[h] = lim
	}
	lim.Allow()
}

// prune forgets the addresses whose failures are all forgiven, or every address when
// none is: the map stays bounded; l.mu is held.
func (l *loginLimiter) prune() {
	for h, lim := range l.hosts {
		if lim.Tokens() >= maxFailures {
			delete(l.hosts, h)
		}
	}
	if len(l.hosts) >= maxLimitedHost {
		clear(l.hosts)
	}
}

func host(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}
