package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func drivers(t *testing.T, test func(t *testing.T, cfg store.Config)) { storetest.Drivers(t, test) }

type clock = storetest.Clock

type bundle struct {
	st    *store.Store
	log   *audit.Log
	clock *clock
	raw   *sql.DB
}

func setup(t *testing.T, cfg store.Config) bundle {
	t.Helper()
	st := storetest.Open(t, cfg)
	c := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	return bundle{st: st, log: audit.New(st, audit.Options{Now: c.Now}), clock: c, raw: storetest.RawDB(t, cfg)}
}

func (b bundle) events(t *testing.T) []store.AuditEvent {
	t.Helper()
	events, err := b.st.AuditEvents(context.Background(), 0, 10000)
	require.NoError(t, err)
	return events
}

func submit(actor, deployment string) audit.Event {
	return audit.Event{Actor: actor, Issuer: audit.IssuerSession, Action: "deployment.submit", DeploymentID: deployment, RequestID: "req-" + deployment, Result: audit.ResultOK}
}

func TestRecordAndVerify(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)

		r, err := b.log.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, audit.Report{}, r, "an empty chain is intact")

		require.NoError(t, b.log.Record(ctx, submit("u1", "d1")))
		ctx = audit.WithActor(ctx, audit.Actor{ID: "u2", Issuer: audit.IssuerToken, RequestID: "r-2"})
		require.NoError(t, b.log.Record(ctx, audit.Event{Action: "deployment.submit", DeploymentID: "d2", Result: audit.ResultInvalid, Reason: "/apps/miniflux/domain"}))
		require.NoError(t, b.log.Record(ctx, audit.Event{Action: "build.cancel", BuildID: "b1", Result: audit.ResultDenied, Reason: "not the owner"}))

		events := b.events(t)
		require.Len(t, events, 3)
		prev := ""
		for i, e := range events {
			require.Equal(t, int64(i+1), e.Seq)
			require.Equal(t, prev, e.PrevHash)
			require.Equal(t, audit.Hash(e), e.Hash)
			prev = e.Hash
		}
		require.Equal(t, "u2", events[1].Actor, "the actor comes from the context")
		require.Equal(t, "token", events[1].Issuer)
		require.Equal(t, "r-2", events[1].RequestID)
		require.Equal(t, "invalid", events[1].Result)

		r, err = b.log.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, audit.Report{Events: 3, LastSeq: 3}, r)

		require.ErrorContains(t, b.log.Record(ctx, audit.Event{Action: "x", Result: "maybe"}), `unknown result "maybe"`)
		require.ErrorContains(t, b.log.Record(ctx, audit.Event{Result: audit.ResultOK}), "action is empty")
	})
}

func TestVerifyFindsAChangedEvent(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		for i := range 4 {
			require.NoError(t, b.log.Record(ctx, submit("u1", fmt.Sprint("d", i))))
		}
		_, err := b.raw.Exec(`UPDATE audit_events SET reason = 'nothing to see' WHERE seq = 2`)
		require.NoError(t, err)

		_, err = b.log.Verify(ctx)
		var broken *audit.ChainError
		require.ErrorAs(t, err, &broken)
		require.Equal(t, int64(2), broken.Seq)
		require.EqualError(t, err, "audit chain broken at sequence 2: its fields do not match its hash: the event was changed after it was recorded")

		// Recomputing the changed event's hash moves the break to the next link.
		events := b.events(t)
		_, err = b.raw.Exec(fmt.Sprintf(`UPDATE audit_events SET hash = '%s' WHERE seq = 2`, audit.Hash(events[1])))
		require.NoError(t, err)
		_, err = b.log.Verify(ctx)
		require.ErrorAs(t, err, &broken)
		require.Equal(t, int64(3), broken.Seq)
		require.ErrorContains(t, err, "prev_hash is not the hash of sequence 2")

		_, err = b.log.Prune(ctx, b.clock.Now().Add(time.Hour))
		require.ErrorContains(t, err, "not pruning the audit events: audit chain broken at sequence 3")
		require.Len(t, b.events(t), 4, "a broken chain is kept")
	})
}

func TestVerifyFindsARemovedEvent(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		for i := range 4 {
			require.NoError(t, b.log.Record(ctx, submit("u1", fmt.Sprint("d", i))))
		}
		_, err := b.raw.Exec(`DELETE FROM audit_events WHERE seq = 4`)
		require.NoError(t, err)
		_, err = b.log.Verify(ctx)
		require.EqualError(t, err, "audit chain broken at sequence 4: the events up to sequence 4, the head of the chain, are missing (removed)")

		_, err = b.raw.Exec(`DELETE FROM audit_events WHERE seq = 2`)
		require.NoError(t, err)
		_, err = b.log.Verify(ctx)
		var broken *audit.ChainError
		require.ErrorAs(t, err, &broken)
		require.Equal(t, int64(2), broken.Seq)
		require.EqualError(t, err, "audit chain broken at sequence 2: the event is missing (removed): the chain goes from sequence 1 to 3")
	})
}

func TestConcurrentAppendsKeepOneChain(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		// A second store is a second fedhost process on the same database.
		other, err := store.Open(ctx, cfg)
		require.NoError(t, err)
		defer other.Close()
		logs := []*audit.Log{b.log, audit.New(other, audit.Options{})}

		const writers, each = 8, 15
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					errs <- logs[w%2].Record(ctx, submit(fmt.Sprint("u", w), fmt.Sprint("d", i)))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		r, err := b.log.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(writers*each), r.Events)
		require.Equal(t, int64(writers*each), r.LastSeq)
	})
}

func TestAnonymousRefusalsAreRateLimited(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		refusal := func(ip string) audit.Event {
			return audit.Event{Action: "deployment.list", Result: audit.ResultDenied, Reason: "no session", ClientIP: ip}
		}
		for range 5 {
			require.NoError(t, b.log.Record(ctx, refusal("192.0.2.1")))
			b.clock.Add(10 * time.Second)
		}
		require.NoError(t, b.log.Record(ctx, refusal("192.0.2.2")))
		events := b.events(t)
		require.Len(t, events, 2, "the first refusal of each address")
		for _, e := range events {
			require.Equal(t, 1, e.Count)
			require.Empty(t, e.Actor)
		}

		// After the window, the next recorded event stores the count first.
		b.clock.Add(300 * time.Second)
		require.NoError(t, b.log.Record(ctx, submit("u1", "d1")))
		events = b.events(t)
		require.Len(t, events, 4)
		require.Equal(t, "deployment.list", events[2].Action)
		require.Equal(t, "denied", events[2].Result)
		require.Equal(t, 4, events[2].Count, "the four refusals not recorded one by one")
		require.True(t, events[2].Time.Equal(events[0].Time.Add(300*time.Second)), "counted at the end of the window")
		require.Equal(t, "deployment.submit", events[3].Action)

		// A new window records its first refusal; Flush stores what it counted.
		for range 3 {
			require.NoError(t, b.log.Record(ctx, refusal("192.0.2.1")))
		}
		require.Len(t, b.events(t), 5)
		require.NoError(t, b.log.Flush(ctx))
		events = b.events(t)
		require.Len(t, events, 6)
		require.Equal(t, 2, events[5].Count)
		require.NoError(t, b.log.Flush(ctx))
		require.Len(t, b.events(t), 6, "nothing left to flush")

		_, err := b.log.Verify(ctx)
		require.NoError(t, err)
	})
}

func TestPruneKeepsTheChainVerifiable(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		for i := range 5 {
			require.NoError(t, b.log.Record(ctx, submit("u1", fmt.Sprint("d", i))))
			b.clock.Add(100 * 24 * time.Hour)
		}
		// Now is 500 days after the first event: events 1 and 2 are past 365 days.
		removed, err := b.log.PruneRetention(ctx, audit.DefaultRetention)
		require.NoError(t, err)
		require.Equal(t, int64(2), removed)

		r, err := b.log.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, audit.Report{Events: 3, CheckpointSeq: 2, LastSeq: 5}, r)

		require.NoError(t, b.log.Record(ctx, submit("u1", "d9")))
		r, err = b.log.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), r.Events)

		removed, err = b.log.PruneRetention(ctx, 0)
		require.NoError(t, err)
		require.Zero(t, removed, "zero keeps all")

		// Removing an event after the checkpoint is still found.
		_, err = b.raw.Exec(`DELETE FROM audit_events WHERE seq = 3`)
		require.NoError(t, err)
		_, err = b.log.Verify(ctx)
		require.EqualError(t, err, "audit chain broken at sequence 3: the event is missing (removed): the chain goes from sequence 2 to 4")
	})
}

func TestLongFieldsAreCut(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		b := setup(t, cfg)
		long := make([]byte, 1000)
		for i := range long {
			long[i] = 'x'
		}
		e := submit("u1", "d1")
		e.RequestID, e.Reason = string(long), string(long)
		require.NoError(t, b.log.Record(ctx, e))
		got := b.events(t)[0]
		require.Len(t, got.RequestID, 128)
		require.Len(t, got.Reason, 256)
	})
}
