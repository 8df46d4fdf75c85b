package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// runDomainRenewals is the daily domain job: once a day (Options.DomainSnapshotEvery)
// for each registrar, it lists the account (Snapshot), records each change of a domain
// the host registered (expiry, lock, nameservers, state; an expiry as its own event),
// and renews for a year each domain
// that expires within 30 days and whose renewal is auto. A registrar that fails is asked
// again at the next tick; the others go on.
func (e *Engine) runDomainRenewals(ctx context.Context, now time.Time) error {
	// What is due is asked of the database: the domains awaiting a delegation checked
	// over an hour ago, and each registrar's domains when its snapshot is due, rather
	// than every domain at every tick.
	awaiting, err := e.opts.Store.DomainsAwaiting(ctx, DomainAwaitingDelegation, now.Add(-delegationRecheck))
	if err != nil {
		return err
	}
	names := e.Registrars()
	every := e.opts.DomainSnapshotEvery
	if every <= 0 {
		every = snapshotEvery
	}
	errs := []error{e.recheckDelegations(ctx, awaiting, now)}
	for _, name := range names {
		last, err := e.opts.Store.LastSnapshot(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !last.IsZero() && now.Sub(last) < every {
			continue
		}
		recs, err := e.opts.Store.DomainsHeldAt(ctx, name, notHeld)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		held := make(map[string]store.Domain, len(recs))
		for _, rec := range recs {
			held[rec.Name] = rec
		}
		if err := e.snapshot(ctx, name, held, now); err != nil {
			e.log.Warn("domain snapshot failed", "registrar", name, "error", err)
			errs = append(errs, fmt.Errorf("registrar %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// notHeld are the states of a registered domain that a snapshot of its registrar's
// account does not concern: not registered yet, refused, or moving in or gone.
var notHeld = []string{DomainConfirmed, DomainRefused, DomainTransferring, DomainTransferFailed, domainTransferredOut}

// delegationRecheck is how often an operator's own domain that is not delegated yet is
// checked again between builds.
const delegationRecheck = time.Hour

// recheckDelegations checks again, once an hour, each delegated domain whose delegation
// did not hold yet, so that its page says when it does.
func (e *Engine) recheckDelegations(ctx context.Context, recs []store.Domain, now time.Time) error {
	var errs []error
	for _, rec := range recs {
		if rec.Mode != store.DomainDelegated || rec.State != DomainAwaitingDelegation || (rec.CheckedAt != nil && now.Sub(*rec.CheckedAt) < delegationRecheck) {
			continue
		}
		want := strings.Fields(rec.Nameservers)
		holds, _, err := e.CheckDelegation(ctx, rec.Name, want)
		columns := map[string]any{"checked_at": now.UTC()}
		if err == nil && holds {
			columns["state"], columns["message"] = DomainDelegatedOK, ""
		}
		if uerr := e.opts.Store.UpdateDomain(ctx, rec.Name, columns); uerr != nil {
			errs = append(errs, uerr)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) snapshot(ctx context.Context, name string, held map[string]store.Domain, now time.Time) error {
	c, err := e.registrarClient(name)
	if err != nil {
		return err
	}
	doms, err := c.Snapshot(ctx)
	if err != nil {
		return registrarError(name, err)
	}
	var errs []error
	listed := map[string]bool{}
	for _, d := range doms {
		listed[d.Name] = true
	}
	for name, rec := range held {
		if rec.State == DomainReleased && !listed[name] {
			// A released domain gone from the account moved to another registrar.
			if err := e.opts.Store.UpdateDomain(ctx, name, map[string]any{"state": domainTransferredOut, "checked_at": now.UTC()}); err != nil {
				errs = append(errs, err)
				continue
			}
			if _, err := e.opts.Store.RecordDomainEvent(ctx, store.DomainEvent{Domain: name, DeploymentID: rec.DeploymentID, Owner: rec.Owner,
				Registrar: rec.Registrar, Kind: store.DomainEventTransferOut, Detail: "no longer in the account"}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, d := range doms {
		rec, ok := held[d.Name]
		if !ok {
			continue
		}
		if err := e.recordSnapshot(ctx, rec, d, now); err != nil {
			errs = append(errs, err)
			continue
		}
		if rec.Renewal == "auto" && d.Status == registrar.StatusActive && !d.Expires.IsZero() && d.Expires.Sub(now) <= renewWithin {
			if _, err := e.renew(ctx, c, rec, 1, "due "+d.Expires.UTC().Format(time.DateOnly)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := e.opts.Store.SnapshotTaken(ctx, name, now, len(doms)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// recordSnapshot writes what the registrar says of a domain and records what changed.
func (e *Engine) recordSnapshot(ctx context.Context, rec store.Domain, d registrar.Domain, now time.Time) error {
	var changed []string
	columns := map[string]any{"checked_at": now.UTC()}
	if !d.Expires.IsZero() && (rec.ExpiresAt == nil || !rec.ExpiresAt.Equal(d.Expires)) {
		columns["expires_at"] = d.Expires.UTC()
		changed = append(changed, "expires "+d.Expires.UTC().Format(time.DateOnly))
	}
	if d.Locked != rec.Locked {
		columns["locked"] = d.Locked
		changed = append(changed, fmt.Sprintf("locked %t", d.Locked))
	}
	if d.DNSSEC != rec.DNSSEC {
		columns["dnssec"] = d.DNSSEC
		changed = append(changed, fmt.Sprintf("dnssec %t", d.DNSSEC))
	}
	if ns := strings.Join(d.Nameservers, " "); len(d.Nameservers) > 0 && !sameNames(d.Nameservers, strings.Fields(rec.Nameservers)) {
		columns["nameservers"] = bounded(ns, maxDomainMessage)
		changed = append(changed, "nameservers "+bounded(ns, 200))
	}
	status := bounded(d.Status, 32)
	expired := (status == "expired" || (!d.Expires.IsZero() && now.After(d.Expires))) && rec.State != "expired"
	if expired {
		status = "expired"
	}
	if status != rec.State && rec.State != DomainReleased {
		columns["state"] = status
		changed = append(changed, "state "+status)
	}
	if err := e.opts.Store.UpdateDomain(ctx, rec.Name, columns); err != nil {
		return err
	}
	kind := store.DomainEventChange
	if expired {
		kind = store.DomainEventExpiry
	}
	if len(changed) == 0 {
		return nil
	}
	_, err := e.opts.Store.RecordDomainEvent(ctx, store.DomainEvent{Domain: rec.Name, DeploymentID: rec.DeploymentID, Owner: rec.Owner,
		Registrar: rec.Registrar, Kind: kind, Detail: bounded(strings.Join(changed, ", "), maxDomainMessage)})
	return err
}

// renew renews a domain for years at the registrar's quoted renewal price and records
// the renewal with that cost.
func (e *Engine) renew(ctx context.Context, c *registrar.Client, rec store.Domain, years int, why string) (store.Domain, error) {
	var cost int64
	var currency string
	if a, err := c.Check(ctx, rec.Name); err == nil {
		cost, currency = a.RenewalPriceMicros*int64(years), a.Currency
	}
	d, err := c.Renew(ctx, rec.Name, years)
	if err != nil {
		return store.Domain{}, registrarError(rec.Registrar, err)
	}
	columns := map[string]any{"message": ""}
	if !d.Expires.IsZero() {
		columns["expires_at"] = d.Expires.UTC()
	}
	if err := e.opts.Store.UpdateDomain(ctx, rec.Name, columns); err != nil {
		return store.Domain{}, err
	}
	detail := fmt.Sprintf("%d year(s), %s", years, why)
	if cost == 0 {
		detail += "; the registrar quoted no renewal price"
	}
	if _, err := e.opts.Store.RecordDomainEvent(ctx, store.DomainEvent{Domain: rec.Name, DeploymentID: rec.DeploymentID, Owner: rec.Owner,
		Registrar: rec.Registrar, Kind: store.DomainEventRenewal, CostMicros: cost, Currency: currency, Detail: bounded(detail, maxDomainMessage)}); err != nil {
		return store.Domain{}, err
	}
	e.log.Info("domain renewed", "domain", rec.Name, "registrar", rec.Registrar, "years", years)
	return e.opts.Store.GetDomain(ctx, rec.Name)
}

// registeredDomain returns the record of a domain the host registered, and its
// registrar's client.
func (e *Engine) registeredDomain(ctx context.Context, name string) (store.Domain, *registrar.Client, error) {
	rec, err := e.opts.Store.GetDomain(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return rec, nil, refuse(CodeNotFound, "/domain", "no deployment has this domain: check its name (fedhost domains lists them)")
	}
	if err != nil {
		return rec, nil, err
	}
	if rec.Mode != store.DomainRegistered || rec.State == DomainConfirmed || rec.State == DomainRefused || rec.State == DomainTransferFailed {
		return rec, nil, refuse(CodeConflict, "/domain", "domain %s is not registered through a registrar of this host", name)
	}
	c, err := e.registrarClient(rec.Registrar)
	if he := (*Error)(nil); errors.As(err, &he) && he.Code == CodeNotFound {
		// The name is the record's, not the caller's: it may be said.
		return rec, nil, refuse(CodeUnavailable, "/registrar", "registrar %s, which holds this domain, is not installed on this host: ask your hosting provider", rec.Registrar)
	}
	return rec, c, err
}

// RenewDomain renews a registered domain for years now, whatever its renewal setting.
func (e *Engine) RenewDomain(ctx context.Context, name string, years int) (store.Domain, error) {
	if years < 1 || years > 10 {
		return store.Domain{}, refuse(CodeInvalidConfiguration, "/years", "renew for 1 to 10 years")
	}
	rec, c, err := e.registeredDomain(ctx, name)
	if err != nil {
		return store.Domain{}, err
	}
	return e.renew(ctx, c, rec, years, "asked for")
}

// SetDomainRenewal sets whether the daily job renews a domain (auto) or leaves it to the
// operator (manual).
func (e *Engine) SetDomainRenewal(ctx context.Context, name, renewal string) (store.Domain, error) {
	if renewal != "auto" && renewal != "manual" {
		return store.Domain{}, refuse(CodeInvalidConfiguration, "/renewal", "renewal is auto or manual")
	}
	if _, err := e.opts.Store.GetDomain(ctx, name); err != nil {
		return store.Domain{}, refuse(CodeNotFound, "/domain", "no deployment has this domain")
	}
	if err := e.opts.Store.UpdateDomain(ctx, name, map[string]any{"renewal": renewal}); err != nil {
		return store.Domain{}, err
	}
	return e.opts.Store.GetDomain(ctx, name)
}

// SetDomainLock sets or lifts a registered domain's transfer lock.
func (e *Engine) SetDomainLock(ctx context.Context, name string, locked bool) (store.Domain, error) {
	rec, c, err := e.registeredDomain(ctx, name)
	if err != nil {
		return store.Domain{}, err
	}
	d, err := c.SetLock(ctx, name, locked)
	if err != nil {
		return store.Domain{}, registrarError(rec.Registrar, err)
	}
	if err := e.opts.Store.UpdateDomain(ctx, name, map[string]any{"locked": d.Locked}); err != nil {
		return store.Domain{}, err
	}
	if _, err := e.opts.Store.RecordDomainEvent(ctx, store.DomainEvent{Domain: name, DeploymentID: rec.DeploymentID, Owner: rec.Owner,
		Registrar: rec.Registrar, Kind: store.DomainEventChange, Detail: fmt.Sprintf("locked %t", d.Locked)}); err != nil {
		return store.Domain{}, err
	}
	return e.opts.Store.GetDomain(ctx, name)
}

// DomainAuthCode reads the code that moves a registered domain to another registrar. It
// is shown to the operator and never kept or logged.
func (e *Engine) DomainAuthCode(ctx context.Context, name string) (string, error) {
	rec, c, err := e.registeredDomain(ctx, name)
	if err != nil {
		return "", err
	}
	code, err := c.AuthCode(ctx, name)
	if err != nil {
		return "", registrarError(rec.Registrar, err)
	}
	return code, nil
}

// domainTransferredOut: the registrar's snapshot no longer lists the domain.
const domainTransferredOut = "transferred_out"

// Release is what a registered domain needs before it leaves (a move to another
// provider, a destroy that keeps the domain): its auth code, the transfer lock lifted and
// DNSSEC removed. Notes say what the registrar could not do.
type Release struct {
	Domain   string
	AuthCode string
	Unlocked bool
	// DNSSECRemoved: the registrar holds no DNSSEC keys for the domain any more.
	DNSSECRemoved bool
	Notes         []string
}

// ReleaseDomain readies a registered domain to leave: reads its auth code, lifts the
// lock, removes DNSSEC, and records the release. What the driver does not offer is
// noted, not failed; a registrar that fails fails the release, and it can be asked again.
func (e *Engine) ReleaseDomain(ctx context.Context, name string) (Release, error) {
	rec, c, err := e.registeredDomain(ctx, name)
	if err != nil {
		return Release{}, err
	}
	out := Release{Domain: name}
	code, err := c.AuthCode(ctx, name)
	switch {
	case sdk.CodeOf(err) == sdk.CodeUnsupported:
		out.Notes = append(out.Notes, "registrar "+rec.Registrar+" hands out no auth codes through its API: ask it for one")
	case err != nil:
		return Release{}, registrarError(rec.Registrar, err)
	default:
		out.AuthCode = code
	}
	d, err := c.SetLock(ctx, name, false)
	switch {
	case sdk.CodeOf(err) == sdk.CodeUnsupported:
		out.Unlocked = !rec.Locked
		if rec.Locked {
			out.Notes = append(out.Notes, "registrar "+rec.Registrar+" sets no lock through its API: lift it at the registrar")
		}
	case err != nil:
		return Release{}, registrarError(rec.Registrar, err)
	default:
		out.Unlocked = !d.Locked
	}
	d, err = c.RemoveDNSSEC(ctx, name)
	switch {
	case sdk.CodeOf(err) == sdk.CodeUnsupported:
		out.DNSSECRemoved = !rec.DNSSEC
		if rec.DNSSEC {
			out.Notes = append(out.Notes, "registrar "+rec.Registrar+" removes no DNSSEC keys through its API: remove them at the registrar")
		}
	case err != nil:
		return Release{}, registrarError(rec.Registrar, err)
	default:
		out.DNSSECRemoved = !d.DNSSEC
	}
	if err := e.opts.Store.UpdateDomain(ctx, name, map[string]any{"state": DomainReleased, "locked": !out.Unlocked, "dnssec": !out.DNSSECRemoved}); err != nil {
		return Release{}, err
	}
	if _, err := e.opts.Store.RecordDomainEvent(ctx, store.DomainEvent{Domain: name, DeploymentID: rec.DeploymentID, Owner: rec.Owner,
		Registrar: rec.Registrar, Kind: store.DomainEventRelease, Detail: bounded(strings.Join(out.Notes, "; "), maxDomainMessage)}); err != nil {
		return Release{}, err
	}
	return out, nil
}

// DeploymentDomain returns the record of a deployment's domain and its newest events
// (at most 50).
func (e *Engine) DeploymentDomain(ctx context.Context, deploymentID string) (store.Domain, []store.DomainEvent, error) {
	rec, err := e.opts.Store.DeploymentDomain(ctx, deploymentID)
	if errors.Is(err, store.ErrNotFound) {
		return rec, nil, refuse(CodeNotFound, "/domain", "this deployment has no domain record yet: check and register one, or deploy to delegate your own")
	}
	if err != nil {
		return rec, nil, err
	}
	evs, err := e.opts.Store.DomainEvents(ctx, rec.Name, 50)
	return rec, evs, err
}

// DomainTransferring: a transfer in was asked for and not answered yet.
const DomainTransferring = "transferring"

// DomainTransferFailed: the registrar or the registry refused the transfer in (a wrong
// auth code, a changed price, a domain that cannot move); the domain stays at its
// registrar, the record's message says why, and a transfer may be asked for again.
const DomainTransferFailed = "transfer_failed"

// TransferConfirmation is an operator's yes to moving their domain to a registrar of
// the host: the confirmation's price is the quoted transfer price, ContactID (optional)
// the operator's contact that holds the domain. AuthCode is never kept.
type TransferConfirmation struct {
	Confirmation
	AuthCode string
}

// TransferDomainIn asks a registrar to move the deployment's domain into the provider's
// account, under a key recorded before the call: asked again after a failure, it never
// transfers or charges twice. The auth code goes to the registrar and nowhere else: not
// in the record, an event or an error, even where the registrar's words quote it. A
// refusal leaves the domain transfer_failed with the registrar's reason; a registrar that
// does not answer leaves it transferring. A transfer the registry keeps pending is
// followed by the next build, which then sets the nameservers and the lock as for a
// registration.
func (e *Engine) TransferDomainIn(ctx context.Context, deploymentID string, c TransferConfirmation) (store.Domain, error) {
	d, rec, err := e.domainFor(ctx, deploymentID, c.Domain, "transfer")
	if err != nil {
		return store.Domain{}, err
	}
	if strings.TrimSpace(c.AuthCode) == "" || len(c.AuthCode) > 255 {
		return store.Domain{}, refuse(CodeInvalidConfiguration, "/auth_code", "give the auth (EPP) code your current registrar hands out")
	}
	if c.PriceMicros <= 0 || len(c.Currency) != 3 {
		return store.Domain{}, refuse(CodeInvalidConfiguration, "/price_micros", "confirm the transfer price and currency the check quoted")
	}
	client, err := e.registrarClient(c.Registrar)
	if err != nil {
		return store.Domain{}, err
	}
	if c.ContactID != "" {
		if _, err := e.opts.Store.GetContact(ctx, d.Owner, c.ContactID); errors.Is(err, store.ErrNotFound) {
			return store.Domain{}, refuse(CodeInvalidConfiguration, "/contact_id", "name one of your contacts (fedhost domains contacts lists them)")
		} else if err != nil {
			return store.Domain{}, err
		}
	}
	if rec.Mode == store.DomainRegistered && rec.State != DomainTransferring && rec.State != DomainTransferFailed && rec.State != DomainRefused && rec.State != registrar.StatusFailed && rec.State != DomainConfirmed {
		return store.Domain{}, refuse(CodeConflict, "/domain", "this domain is %s at %s already", rec.State, rec.Registrar)
	}
	if rec.State != DomainTransferring || rec.Registrar != c.Registrar || rec.PriceMicros != c.PriceMicros || rec.Currency != c.Currency {
		rec = store.Domain{Name: c.Domain, DeploymentID: d.ID, Owner: d.Owner, Mode: store.DomainRegistered, Registrar: c.Registrar,
			State: DomainTransferring, ContactID: c.ContactID, PriceMicros: c.PriceMicros, Currency: c.Currency,
			ConfirmationKey: "fedhost-" + newKey(), Renewal: "auto"}
		if err := e.opts.Store.PutDomain(ctx, rec); err != nil {
			return store.Domain{}, err
		}
	}
	owner := ""
	if c.ContactID != "" {
		// A registrar that keeps no contacts, or does not take this one, uses the account's.
		owner, _ = e.putContact(ctx, client, d.Owner, c.ContactID)
	}
	got, err := client.Transfer(ctx, registrar.TransferRequest{Domain: c.Domain, AuthCode: c.AuthCode, OwnerContact: owner, PriceMicros: c.PriceMicros, Currency: c.Currency,
		IdempotencyKey: rec.ConfirmationKey})
	if err != nil {
		he := &Error{Code: CodeUnavailable, Message: err.Error()}
		_ = errors.As(registrarError(c.Registrar, err), &he)
		he.Message = withoutAuthCode(he.Message, c.AuthCode)
		if he.Code == CodeUnavailable {
			_ = e.opts.Store.UpdateDomain(ctx, c.Domain, map[string]any{"message": "the registrar did not answer the transfer: ask for it again"})
		} else {
			_ = e.opts.Store.UpdateDomain(ctx, c.Domain, map[string]any{"state": DomainTransferFailed, "message": bounded(he.Message, maxDomainMessage)})
		}
		return store.Domain{}, he
	}
	state, message := got.Status, ""
	switch state {
	case "":
		state = registrar.StatusPending
	case registrar.StatusFailed:
		state, message = DomainTransferFailed, "the registry refused the transfer"
	}
	columns := map[string]any{"state": bounded(state, 32), "message": message}
	if !got.Expires.IsZero() {
		columns["expires_at"] = got.Expires.UTC()
	}
	if err := e.opts.Store.UpdateDomain(ctx, c.Domain, columns); err != nil {
		return store.Domain{}, err
	}
	if state != DomainTransferFailed {
		if _, err := e.opts.Store.RecordDomainEvent(ctx, store.DomainEvent{Domain: c.Domain, DeploymentID: d.ID, Owner: d.Owner, Registrar: c.Registrar,
			Kind: store.DomainEventTransferIn, CostMicros: c.PriceMicros, Currency: c.Currency, Detail: "transfer " + bounded(state, 32)}); err != nil {
			return store.Domain{}, err
		}
	}
	return e.opts.Store.GetDomain(ctx, c.Domain)
}

// withoutAuthCode is a registrar's words with the auth code taken out, should they quote it.
func withoutAuthCode(s, code string) string {
	for _, c := range []string{code, strings.TrimSpace(code)} {
		if c != "" {
			s = strings.ReplaceAll(s, c, "[auth code]")
		}
	}
	return s
}
