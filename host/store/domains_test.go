package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/storetest"
)

// A contact is its owner's alone; a domain's record is kept whole; events and app
// periods are read back by owner and time range.
func TestDomainsContactsEventsAndPeriods(t *testing.T) {
	storetest.Drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := storetest.Open(t, cfg)

		c, err := st.PutContact(ctx, store.Contact{Owner: "alice", Name: "Alice", Email: "a@acme.test", Phone: "+4930123456", Country: "DE"})
		require.NoError(t, err)
		_, err = st.GetContact(ctx, "bob", c.ID)
		require.ErrorIs(t, err, store.ErrNotFound, "bob does not see alice's contact")
		_, err = st.PutContact(ctx, store.Contact{ID: c.ID, Owner: "bob", Name: "Bob"})
		require.ErrorIs(t, err, store.ErrNotFound, "bob cannot change alice's contact")
		c.City = "Berlin"
		c, err = st.PutContact(ctx, c)
		require.NoError(t, err)
		require.Equal(t, "Berlin", c.City)
		list, err := st.Contacts(ctx, "alice")
		require.NoError(t, err)
		require.Len(t, list, 1)

		exp := time.Date(2027, 5, 1, 0, 0, 0, 0, time.UTC)
		require.NoError(t, st.PutDomain(ctx, store.Domain{Name: "acme.test", DeploymentID: "d1", Owner: "alice", Mode: store.DomainRegistered,
			Registrar: "porkbun", State: "confirmed", ConfirmationKey: "k1", PriceMicros: 9730000, Currency: "USD", ExpiresAt: &exp}))
		d, err := st.GetDomain(ctx, "acme.test")
		require.NoError(t, err)
		require.Equal(t, "k1", d.ConfirmationKey)
		require.Equal(t, "auto", d.Renewal)
		require.True(t, exp.Equal(*d.ExpiresAt))
		require.NoError(t, st.UpdateDomain(ctx, "acme.test", map[string]any{"state": "active", "locked": true}))
		ds, err := st.Domains(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, ds)
		ds, err = st.Domains(ctx, "")
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.True(t, ds[0].Locked)

		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		_, err = st.RecordDomainEvent(ctx, store.DomainEvent{Time: t0, Domain: "acme.test", Owner: "alice", Kind: store.DomainEventRegistration, CostMicros: 9730000, Currency: "USD"})
		require.NoError(t, err)
		_, err = st.RecordDomainEvent(ctx, store.DomainEvent{Time: t0.AddDate(1, 0, 0), Domain: "acme.test", Owner: "alice", Kind: store.DomainEventRenewal, CostMicros: 10810000, Currency: "USD"})
		require.NoError(t, err)
		evs, err := st.DomainEventsBetween(ctx, "alice", t0, t0.AddDate(0, 1, 0))
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, store.DomainEventRegistration, evs[0].Kind)
		evs, err = st.DomainEventsBetween(ctx, "bob", t0, t0.AddDate(2, 0, 0))
		require.NoError(t, err)
		require.Empty(t, evs)

		require.NoError(t, st.RecordAppPeriods(ctx, "d1", "alice", map[string]string{"miniflux": "postgresql"}, t0))
		require.NoError(t, st.RecordAppPeriods(ctx, "d1", "alice", map[string]string{"miniflux": "postgresql", "hello": "instance"}, t0.Add(time.Hour)))
		require.NoError(t, st.RecordAppPeriods(ctx, "d1", "alice", map[string]string{"hello": "instance"}, t0.Add(2*time.Hour)))
		ps, err := st.AppPeriodsBetween(ctx, "alice", t0, t0.Add(24*time.Hour))
		require.NoError(t, err)
		require.Len(t, ps, 2)
		require.Equal(t, "miniflux", ps[0].App)
		require.NotNil(t, ps[0].EndedAt)
		require.True(t, t0.Add(2*time.Hour).Equal(*ps[0].EndedAt))
		require.Equal(t, "hello", ps[1].App)
		require.Nil(t, ps[1].EndedAt)
		ps, err = st.AppPeriodsBetween(ctx, "alice", t0.Add(3*time.Hour), t0.Add(24*time.Hour))
		require.NoError(t, err)
		require.Len(t, ps, 1, "miniflux ended before the range")
	})
}

// The domain job's reads answer what it used to filter from every domain: the delegated
// domains awaiting a delegation checked at or before the bound (or never), and the
// domains registered at one registrar in a state a snapshot concerns.
func TestDomainsDueForTheDomainJob(t *testing.T) {
	storetest.Drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := storetest.Open(t, cfg)
		bound := time.Date(2026, 12, 2, 10, 0, 0, 123456000, time.UTC)
		at := func(d time.Duration) *time.Time { t := bound.Add(d); return &t }
		put := func(name, mode, registrar, state string, checked *time.Time) {
			require.NoError(t, st.PutDomain(ctx, store.Domain{Name: name, DeploymentID: "d-" + name, Owner: "alice", Mode: mode,
				Registrar: registrar, State: state, CheckedAt: checked}))
		}
		put("never.test", store.DomainDelegated, "", "awaiting_delegation", nil)
		put("at-bound.test", store.DomainDelegated, "", "awaiting_delegation", at(0))
		put("before.test", store.DomainDelegated, "", "awaiting_delegation", at(-time.Minute))
		put("after.test", store.DomainDelegated, "", "awaiting_delegation", at(time.Microsecond))
		put("delegated.test", store.DomainDelegated, "", "delegated", nil)
		put("registered.test", store.DomainRegistered, "porkbun", "awaiting_delegation", nil)
		put("a.test", store.DomainRegistered, "porkbun", "registered", nil)
		put("b.test", store.DomainRegistered, "porkbun", "released", nil)
		put("c.test", store.DomainRegistered, "porkbun", "confirmed", nil)
		put("d.test", store.DomainRegistered, "inwx", "registered", nil)

		names := func(ds []store.Domain, err error) []string {
			require.NoError(t, err)
			var out []string
			for _, d := range ds {
				out = append(out, d.Name)
			}
			return out
		}
		require.Equal(t, []string{"at-bound.test", "before.test", "never.test"},
			names(st.DomainsAwaiting(ctx, "awaiting_delegation", bound)))
		require.Equal(t, []string{"a.test", "b.test", "registered.test"},
			names(st.DomainsHeldAt(ctx, "porkbun", []string{"confirmed"})))
		require.Equal(t, []string{"d.test"}, names(st.DomainsHeldAt(ctx, "inwx", nil)))
	})
}
