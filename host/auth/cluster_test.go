package auth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

// TestHostsShareTheLoginThrottle: two fedhosts on one PostgreSQL count the same failed
// logins (issue 16): the 6th failure of an account from one address is refused by
// whichever host gets it, and a success on one host clears the count for both.
func TestHostsShareTheLoginThrottle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := store.Config{Database: pgtest.DSN(t)}
	c := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	one := auth.New(storetest.Open(t, cfg), auth.Options{Now: c.Now})
	two := auth.New(storetest.Open(t, cfg), auth.Options{Now: c.Now})
	hosts := []*auth.Service{one, two}
	_, password, err := one.CreateUser(ctx, "dave", false)
	require.NoError(t, err)

	const attacker = "192.0.2.77"
	for i := range auth.PairFailures {
		_, err := hosts[i%2].Authenticate(ctx, "dave", "guess", attacker)
		require.ErrorIs(t, err, auth.ErrBadCredentials, "failure %d", i+1)
	}
	for _, h := range hosts {
		_, err := h.Authenticate(ctx, "dave", password, attacker)
		var limited *auth.RateLimitedError
		require.ErrorAs(t, err, &limited, "the 6th try waits whichever host gets it")
		require.Equal(t, auth.FirstDelay, limited.RetryAfter)
	}

	c.Add(auth.FirstDelay)
	_, err = two.Authenticate(ctx, "dave", password, attacker)
	require.NoError(t, err, "after the wait the right password gets through")
	for range auth.PairFailures {
		_, err := one.Authenticate(ctx, "dave", "guess", attacker)
		require.ErrorIs(t, err, auth.ErrBadCredentials, "the success on the other host cleared the count")
	}
}

// TestGuessesAtOnceAreAllCounted: guesses sent at the same moment to two hosts are each
// counted, so no more than PairFailures of them reach the password check.
func TestGuessesAtOnceAreAllCounted(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		c := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
		hosts := []*auth.Service{
			auth.New(storetest.Open(t, cfg), auth.Options{Now: c.Now}),
			auth.New(storetest.Open(t, cfg), auth.Options{Now: c.Now}),
		}
		_, _, err := hosts[0].CreateUser(ctx, "erin", false)
		require.NoError(t, err)

		const guesses = 16
		var wg sync.WaitGroup
		errs := make([]error, guesses)
		for i := range guesses {
			wg.Go(func() {
				_, errs[i] = hosts[i%2].Authenticate(ctx, "erin", "guess", "203.0.113.5")
			})
		}
		wg.Wait()
		checked := 0
		for _, err := range errs {
			if err == nil || !(errors.Is(err, auth.ErrBadCredentials) || errors.Is(err, auth.ErrRateLimited)) {
				t.Fatalf("a guess was answered %v", err)
			}
			if errors.Is(err, auth.ErrBadCredentials) {
				checked++
			}
		}
		require.Equal(t, auth.PairFailures, checked, "guesses whose password was checked")
	})
}
