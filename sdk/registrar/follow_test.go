package registrar_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// snapshotOnly lists a domain as pending for its first reads, as a driver without
// DomainReader (or a plugin of an older sdk) does; listed is how many snapshots it
// takes to appear, pending how many more it stays pending.
type snapshotOnly struct {
	mu              sync.Mutex
	listed, pending int
	reads           int
}

func (s *snapshotOnly) Check(context.Context, string) (registrar.Availability, error) {
	return registrar.Availability{}, nil
}
func (s *snapshotOnly) Register(context.Context, registrar.RegisterRequest) (registrar.Domain, error) {
	return registrar.Domain{}, nil
}
func (s *snapshotOnly) Renew(context.Context, string, int) (registrar.Domain, error) {
	return registrar.Domain{}, nil
}
func (s *snapshotOnly) SetNameservers(context.Context, string, []string) (registrar.Domain, error) {
	return registrar.Domain{}, nil
}

func (s *snapshotOnly) Snapshot(context.Context) ([]registrar.Domain, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	switch {
	case s.reads <= s.listed:
		return []registrar.Domain{{Name: "other.test", Status: registrar.StatusActive}}, nil
	case s.reads <= s.listed+s.pending:
		return []registrar.Domain{{Name: "a.test", Status: registrar.StatusPending}}, nil
	}
	return []registrar.Domain{{Name: "a.test", Status: registrar.StatusActive, Expires: time.Unix(1e9, 0)}}, nil
}

// unsupportedReader answers Domain as a plugin of an older sdk does.
type unsupportedReader struct{ *snapshotOnly }

func (unsupportedReader) Domain(context.Context, string) (registrar.Domain, error) {
	return registrar.Domain{}, sdk.Errorf(sdk.CodeUnsupported, "no")
}

func TestFollowWithSnapshot(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]registrar.Registrar{
		"no reader":          &snapshotOnly{listed: 2, pending: 2},
		"unsupported reader": unsupportedReader{&snapshotOnly{listed: 2, pending: 2}},
	} {
		d, err := registrar.Follow(context.Background(), r, "a.test", time.Millisecond)
		require.NoError(t, err, name)
		require.Equal(t, registrar.StatusActive, d.Status, name)
		require.False(t, d.Expires.IsZero(), name)
	}
}

func TestFollowStopsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := registrar.Follow(ctx, &snapshotOnly{listed: 1 << 30}, "a.test", 5*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
