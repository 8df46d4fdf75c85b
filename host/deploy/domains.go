package deploy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/miekg/dns"
	"golang.org/x/text/language"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// Domain states the host records; a registrar's own words (e.g. "expired") are kept as
// they are.
const (
	// DomainConfirmed: the operator confirmed the price; the registration is asked for
	// at the next build.
	DomainConfirmed = "confirmed"
	// DomainAwaitingDelegation: the operator is to set the nameservers shown at their
	// registrar; DomainDelegatedOK once the delegation holds.
	DomainAwaitingDelegation = "awaiting_delegation"
	DomainDelegatedOK        = "delegated"
	// DomainRefused: the registrar refused the registration (a changed price, a taken
	// domain): the operator checks and confirms again.
	DomainRefused  = "refused"
	DomainReleased = "released"
)

// defaultDomainFollow is how long a build follows a pending registration.
const defaultDomainFollow = 2 * time.Minute

// renewWithin is how far ahead of its expiry a domain is renewed.
const renewWithin = 30 * 24 * time.Hour

// snapshotEvery is how often each registrar's account is listed, unless
// Options.DomainSnapshotEvery says otherwise.
const snapshotEvery = 24 * time.Hour

// maxDomainMessage bounds what the store keeps of a registrar's words.
const maxDomainMessage = 500

// e164 is a phone number as registries take it: +, country code, at most 15 digits.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// registrarClient returns the client of a registrar plugin.
func (e *Engine) registrarClient(name string) (*registrar.Client, error) {
	if e.opts.Plugins == nil {
		return nil, refuse(CodeUnavailable, "/registrar", "this host runs no registrar: add a registrar block to fedhost.hcl")
	}
	p, ok := e.opts.Plugins.Find(sdk.KindRegistrar, name, "")
	if !ok || !e.configuredRegistrar(name) {
		return nil, refuse(CodeNotFound, "/registrar", "no such registrar is installed: name one of fedhost.hcl's registrar blocks (GET /api/v1/registrars lists them)")
	}
	c, err := p.Client()
	if err != nil {
		return nil, refuse(CodeUnavailable, "/registrar", "registrar %s is not running (%v): try again once it is", name, err)
	}
	return c.Registrar(), nil
}

// Registrars names the registrar plugins installed that fedhost.hcl configures.
func (e *Engine) Registrars() []string {
	if e.opts.Plugins == nil {
		return nil
	}
	var names []string
	for _, p := range e.opts.Plugins.Plugins() {
		if p.Kind == sdk.KindRegistrar && e.configuredRegistrar(p.Name) {
			names = append(names, p.Name)
		}
	}
	return names
}

// configuredRegistrar: fedhost.hcl has a registrar block for name (or the engine was
// given no list).
func (e *Engine) configuredRegistrar(name string) bool {
	return e.opts.Registrars == nil || slices.Contains(e.opts.Registrars, name)
}

// ValidateContact checks a contact as registries need it; the error names the field.
func ValidateContact(c store.Contact) error {
	fields := []struct{ pointer, value string }{
		{"/name", c.Name}, {"/organization", c.Organization}, {"/email", c.Email}, {"/phone", c.Phone},
		{"/street", c.Street}, {"/city", c.City}, {"/postal_code", c.PostalCode}, {"/country", c.Country},
	}
	for _, f := range fields {
		if len(f.value) > 255 || !utf8.ValidString(f.value) || strings.ContainsAny(f.value, "\r\n\x00") {
			return refuse(CodeInvalidConfiguration, f.pointer, "use at most 255 characters of one line of text")
		}
	}
	if strings.TrimSpace(c.Name) == "" {
		return refuse(CodeInvalidConfiguration, "/name", "name the domain's holder: a person or an organization's contact")
	}
	if a, err := mail.ParseAddress(c.Email); err != nil || a.Address != c.Email || a.Name != "" {
		return refuse(CodeInvalidConfiguration, "/email", "give one plain e-mail address, like hostmaster@example.org")
	}
	if !e164.MatchString(c.Phone) {
		return refuse(CodeInvalidConfiguration, "/phone", "give the phone number in E.164 form: +, the country code and the number, digits only (+4930123456)")
	}
	if r, err := language.ParseRegion(c.Country); err != nil || len(c.Country) != 2 || !r.IsCountry() || r.String() != c.Country {
		return refuse(CodeInvalidConfiguration, "/country", "give the country as its ISO 3166-1 alpha-2 code in capitals (DE, FR, US)")
	}
	if strings.TrimSpace(c.Street) == "" || strings.TrimSpace(c.City) == "" || strings.TrimSpace(c.PostalCode) == "" {
		return refuse(CodeInvalidConfiguration, "/street", "give the postal address: street, city and postal code")
	}
	return nil
}

// SaveContact validates and stores a contact of owner (a new one when ID is empty).
func (e *Engine) SaveContact(ctx context.Context, owner string, c store.Contact) (store.Contact, error) {
	c.Owner = owner
	if err := ValidateContact(c); err != nil {
		return store.Contact{}, err
	}
	out, err := e.opts.Store.PutContact(ctx, c)
	if errors.Is(err, store.ErrNotFound) {
		return store.Contact{}, refuse(CodeNotFound, "/id", "you have no such contact: leave id empty to add one")
	}
	return out, err
}

// validDomain refuses what cannot be a registrable domain name.
func validDomain(name string) error {
	if _, ok := dns.IsDomainName(name); !ok || len(name) > 253 || !strings.Contains(name, ".") || strings.HasSuffix(name, ".") ||
		strings.ToLower(name) != name || strings.ContainsAny(name, " *_") {
		return refuse(CodeInvalidConfiguration, "/domain", "give a domain name in lowercase, like acme.example")
	}
	return nil
}

// registrarError turns a registrar's refusal into the host's: a refusal of input names
// its field, anything else is unavailable, so a later build tries again.
func registrarError(name string, err error) error {
	switch sdk.CodeOf(err) {
	case sdk.CodeInvalid:
		field := sdk.FieldOf(err)
		if field == "" {
			field = "domain"
		}
		return refuse(CodeInvalidConfiguration, "/"+field, "registrar %s refused it: %s", name, bounded(sdkMessage(err), maxDomainMessage))
	case sdk.CodeNotFound:
		return refuse(CodeNotFound, "/domain", "registrar %s does not hold this domain in the provider's account", name)
	case sdk.CodeUnsupported:
		return refuse(CodeConflict, "", "registrar %s does not offer this", name)
	case sdk.CodeConflict:
		return refuse(CodeConflict, "/domain", "registrar %s: %s", name, bounded(sdkMessage(err), maxDomainMessage))
	}
	return refuse(CodeUnavailable, "", "registrar %s did not answer (%s): nothing changed; the next build tries again", name, bounded(sdkMessage(err), maxDomainMessage))
}

// hostMessage is the message of a host's refusal, or the error's text.
func hostMessage(err error) string {
	var he *Error
	if errors.As(err, &he) {
		return he.Message
	}
	return err.Error()
}

func sdkMessage(err error) string {
	var se *sdk.Error
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}

func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// CheckDomain asks a registrar whether domain can be registered, and at what price: the
// quote the operator confirms.
func (e *Engine) CheckDomain(ctx context.Context, registrarName, domain string) (registrar.Availability, error) {
	if err := validDomain(domain); err != nil {
		return registrar.Availability{}, err
	}
	c, err := e.registrarClient(registrarName)
	if err != nil {
		return registrar.Availability{}, err
	}
	a, err := c.Check(ctx, domain)
	if err != nil {
		return registrar.Availability{}, registrarError(registrarName, err)
	}
	a.Reason = bounded(a.Reason, maxDomainMessage)
	return a, nil
}

// Confirmation is an operator's yes to a registration at a quoted price.
type Confirmation struct {
	Registrar   string
	Domain      string
	ContactID   string
	PriceMicros int64
	Currency    string
}

// ConfirmRegistration records the operator's confirmation of a registration for a
// deployment, with a new key under which the registration is asked for at the next build:
// a confirmation is asked for once, whatever fails and is tried again. Confirming the same
// again changes nothing.
func (e *Engine) ConfirmRegistration(ctx context.Context, deploymentID string, c Confirmation) (store.Domain, error) {
	d, old, err := e.domainFor(ctx, deploymentID, c.Domain, "register")
	if err != nil {
		return store.Domain{}, err
	}
	if c.PriceMicros <= 0 || len(c.Currency) != 3 {
		return store.Domain{}, refuse(CodeInvalidConfiguration, "/price_micros", "confirm the price and currency the check quoted")
	}
	if _, err := e.registrarClient(c.Registrar); err != nil {
		return store.Domain{}, err
	}
	if _, err := e.opts.Store.GetContact(ctx, d.Owner, c.ContactID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.Domain{}, refuse(CodeInvalidConfiguration, "/contact_id", "name one of your contacts (fedhost domains contacts lists them)")
		}
		return store.Domain{}, err
	}
	if old.Mode == store.DomainRegistered && old.State != DomainRefused && old.State != registrar.StatusFailed {
		if old.State == DomainConfirmed && old.PriceMicros == c.PriceMicros && old.Currency == c.Currency && old.Registrar == c.Registrar && old.ContactID == c.ContactID {
			return old, nil
		}
		return store.Domain{}, refuse(CodeConflict, "/domain", "this domain's registration is %s already", old.State)
	}
	rec := store.Domain{Name: c.Domain, DeploymentID: d.ID, Owner: d.Owner, Mode: store.DomainRegistered, Registrar: c.Registrar,
		State: DomainConfirmed, ContactID: c.ContactID, PriceMicros: c.PriceMicros, Currency: c.Currency,
		ConfirmationKey: "fedhost-" + newKey(), Renewal: "auto"}
	if old.Renewal != "" {
		rec.Renewal = old.Renewal
	}
	if err := e.opts.Store.PutDomain(ctx, rec); err != nil {
		return store.Domain{}, err
	}
	return e.opts.Store.GetDomain(ctx, c.Domain)
}

// domainFor is the deployment a registration or a transfer in of domain is asked for
// (verb says which, for the refusal), and the domain's record where there is one (Name
// empty where none): a domain that is not the deployment's, or that another deployment
// holds, is refused.
func (e *Engine) domainFor(ctx context.Context, deploymentID, domain, verb string) (store.Deployment, store.Domain, error) {
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return d, store.Domain{}, err
	}
	if err := validDomain(domain); err != nil {
		return d, store.Domain{}, err
	}
	if d.Domain != "" && d.Domain != domain {
		return d, store.Domain{}, refuse(CodeConflict, "/domain", "this deployment's domain is %s: %s that one, or change the deployment's domain first", d.Domain, verb)
	}
	rec, err := e.opts.Store.GetDomain(ctx, domain)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return d, store.Domain{}, nil
	case err != nil:
		return d, store.Domain{}, err
	case rec.DeploymentID != d.ID:
		return d, store.Domain{}, refuse(CodeConflict, "/domain", "another deployment has this domain")
	}
	return d, rec, nil
}

// domainStep brings the deployment's domain in step with its zone, once the zone is
// served (its nameservers known): a confirmed registration is asked for (under its
// confirmation key) and followed while pending, then the registrar's nameservers are set
// to the zone's and the domain locked; a domain the host did not register is delegated,
// and the operator is shown the nameservers to set. A registrar that fails stops nothing
// that runs: the build fails here with unavailable, and the next one goes on.
func (r *run) domainStep(ctx context.Context, domain string, zone contract.DNSResult) error {
	st := r.e.opts.Store
	rec, err := st.GetDomain(ctx, domain)
	missing := errors.Is(err, store.ErrNotFound)
	if err != nil && !missing {
		return err
	}
	if t := r.transfer; t != nil && t.Domain == domain && (missing || (rec.DeploymentID == r.d.ID && rec.State == DomainTransferring)) {
		// An import's confirmed transfer is asked for after the restore and the users.
		r.event(store.LevelInfo, "domain", 5, "%s is transferred to %s once the import's data and users are in: the build after the transfer sets its nameservers", domain, t.Registrar)
		return nil
	}
	if missing {
		rec = store.Domain{Name: domain, DeploymentID: r.d.ID, Owner: r.d.Owner, Mode: store.DomainDelegated, State: DomainAwaitingDelegation, Renewal: "auto"}
	}
	if rec.DeploymentID != r.d.ID {
		return refuse(CodeConflict, "/domain", "another deployment's record holds domain %s", domain)
	}
	if rec.Mode == store.DomainDelegated {
		return r.delegation(ctx, rec, zone.Nameservers)
	}
	if rec.State == DomainTransferFailed {
		// The domain stayed at its registrar: nothing to ask this host's.
		r.event(store.LevelWarn, "domain", 6, "the transfer of %s to %s failed (%s): transfer it again (fedhost domains transfer), or set its nameservers at its registrar to %s",
			domain, rec.Registrar, bounded(rec.Message, maxDomainMessage), strings.Join(zone.Nameservers, ", "))
		return nil
	}
	c, err := r.e.registrarClient(rec.Registrar)
	if err != nil {
		return r.domainFailed(ctx, rec, err)
	}
	var got registrar.Domain
	switch rec.State {
	case DomainConfirmed:
		contact := ""
		if cm := rec.ContactID; cm != "" {
			contact = r.registrarContact(ctx, c, rec)
		}
		r.event(store.LevelInfo, "domain", 5, "registering %s at %s for %s", domain, rec.Registrar, price(rec.PriceMicros, rec.Currency))
		got, err = c.Register(ctx, registrar.RegisterRequest{Domain: domain, Years: 1, OwnerContact: contact, AdminContact: contact, TechContact: contact, BillingContact: contact,
			Nameservers: zone.Nameservers, PriceMicros: rec.PriceMicros, Currency: rec.Currency, IdempotencyKey: rec.ConfirmationKey})
		if err != nil {
			herr := registrarError(rec.Registrar, err)
			if he := (*Error)(nil); errors.As(herr, &he) && he.Code == CodeInvalidConfiguration {
				// Nothing was charged: the confirmation is spent, the operator checks again.
				_ = st.UpdateDomain(ctx, domain, map[string]any{"state": DomainRefused, "message": bounded(he.Message, maxDomainMessage)})
				return herr
			}
			return r.domainFailed(ctx, rec, herr)
		}
		if got.Status != registrar.StatusFailed {
			if _, err := st.RecordDomainEvent(ctx, store.DomainEvent{Domain: domain, DeploymentID: rec.DeploymentID, Owner: rec.Owner, Registrar: rec.Registrar,
				Kind: store.DomainEventRegistration, CostMicros: rec.PriceMicros, Currency: rec.Currency, Detail: "1 year"}); err != nil {
				return err
			}
		}
	case DomainTransferring:
		return refuse(CodeUnavailable, "/domain", "the registrar did not answer the transfer of %s: ask for the transfer again", domain)
	case DomainReleased:
		r.event(store.LevelInfo, "domain", 5, "domain %s is released to leave %s: left as it is", domain, rec.Registrar)
		return nil
	case registrar.StatusActive:
		if sameNames(strings.Fields(rec.Nameservers), zone.Nameservers) {
			// Delegated as it should be: the registrar is not asked, so one that is down
			// fails no build.
			r.event(store.LevelInfo, "domain", 7, "domain %s is active at %s, delegated to the zone's nameservers", domain, rec.Registrar)
			return nil
		}
		got = registrar.Domain{Name: domain, Status: rec.State}
	case registrar.StatusPending:
		got = registrar.Domain{Name: domain, Status: rec.State}
	default:
		return refuse(CodeConflict, "/domain", "the registration of %s is %s: check the domain and confirm its price again", domain, rec.State)
	}
	if got.Status == registrar.StatusPending {
		r.event(store.LevelInfo, "domain", 6, "the registry keeps %s pending: following it", domain)
		if err := st.UpdateDomain(ctx, domain, map[string]any{"state": registrar.StatusPending, "message": ""}); err != nil {
			return err
		}
		follow := r.e.opts.DomainFollow
		if follow <= 0 {
			follow = defaultDomainFollow
		}
		fctx, cancel := context.WithTimeout(ctx, follow)
		got, err = registrar.Follow(fctx, c, domain, r.e.opts.DomainFollowInterval)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = refuse(CodeUnavailable, "/domain", "the registry still keeps %s pending after %s: the next build follows it on", domain, follow)
			} else {
				err = registrarError(rec.Registrar, err)
			}
			return r.domainFailed(ctx, rec, err)
		}
	}
	if got.Status == registrar.StatusFailed {
		if evs, err := st.DomainEvents(ctx, domain, 1); err == nil && len(evs) == 1 && evs[0].Kind == store.DomainEventTransferIn {
			_ = st.UpdateDomain(ctx, domain, map[string]any{"state": DomainTransferFailed, "message": "the registry refused the transfer"})
			r.event(store.LevelWarn, "domain", 6, "the registry refused the transfer of %s: transfer it again (fedhost domains transfer), or set its nameservers at its registrar to %s", domain, strings.Join(zone.Nameservers, ", "))
			return nil
		}
		_ = st.UpdateDomain(ctx, domain, map[string]any{"state": registrar.StatusFailed, "message": "the registry refused the registration; nothing is charged"})
		return refuse(CodeConflict, "/domain", "the registry refused the registration of %s; nothing is charged: check another domain", domain)
	}
	if got.Status == registrar.StatusActive || got.Nameservers == nil {
		if got, err = r.delegate(ctx, c, rec, zone.Nameservers); err != nil {
			return r.domainFailed(ctx, rec, err)
		}
	}
	columns := map[string]any{"state": got.Status, "locked": got.Locked, "dnssec": got.DNSSEC, "nameservers": strings.Join(got.Nameservers, " "), "message": ""}
	if !got.Expires.IsZero() {
		columns["expires_at"] = got.Expires.UTC()
	}
	if err := st.UpdateDomain(ctx, domain, columns); err != nil {
		return err
	}
	r.event(store.LevelInfo, "domain", 7, "domain %s is %s at %s, delegated to %s", domain, got.Status, rec.Registrar, strings.Join(got.Nameservers, ", "))
	return nil
}

// delegate sets the registrar's nameservers to the zone's and locks the domain, where
// the driver can; the domain as the registrar holds it then.
func (r *run) delegate(ctx context.Context, c *registrar.Client, rec store.Domain, nameservers []string) (registrar.Domain, error) {
	got, err := c.Domain(ctx, rec.Name)
	if sdk.CodeOf(err) == sdk.CodeUnsupported {
		got, err = registrar.Domain{Name: rec.Name, Status: registrar.StatusActive}, nil
	}
	if err != nil {
		return got, registrarError(rec.Registrar, err)
	}
	if !sameNames(got.Nameservers, nameservers) && len(nameservers) > 0 {
		if got, err = c.SetNameservers(ctx, rec.Name, nameservers); err != nil {
			return got, registrarError(rec.Registrar, err)
		}
		r.event(store.LevelInfo, "domain", 7, "nameservers of %s set to %s", rec.Name, strings.Join(nameservers, ", "))
	}
	if !got.Locked && rec.State != DomainReleased {
		locked, err := c.SetLock(ctx, rec.Name, true)
		switch {
		case sdk.CodeOf(err) == sdk.CodeUnsupported:
			r.event(store.LevelInfo, "domain", 7, "registrar %s sets no transfer lock: %s stays unlocked", rec.Registrar, rec.Name)
		case err != nil:
			return got, registrarError(rec.Registrar, err)
		default:
			got = locked
		}
	}
	return got, nil
}

// registrarContact is the registrar's id of the domain's contact, put there first; ""
// where the driver keeps no contacts (the account's own are used).
func (r *run) registrarContact(ctx context.Context, c *registrar.Client, rec store.Domain) string {
	id, err := r.e.putContact(ctx, c, rec.Owner, rec.ContactID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		r.event(store.LevelWarn, "domain", 5, "registrar %s did not take the contact (%s): the account's own contact is used", rec.Registrar, errorCode(err))
	}
	return id
}

// putContact puts owner's contact id at the registrar and answers its id there: "" where
// the driver keeps no contacts, and with the error where the contact is not found or the
// registrar did not take it (the account's own contact is used then).
func (e *Engine) putContact(ctx context.Context, c *registrar.Client, owner, id string) (string, error) {
	ct, err := e.opts.Store.GetContact(ctx, owner, id)
	if err != nil {
		return "", err
	}
	out, err := c.PutContact(ctx, registrar.Contact{Name: ct.Name, Organization: ct.Organization, Email: ct.Email, Phone: ct.Phone,
		Street: ct.Street, City: ct.City, PostalCode: ct.PostalCode, Country: ct.Country})
	if sdk.CodeOf(err) == sdk.CodeUnsupported {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return out.ID, nil
}

// domainFailed records why the domain step failed and returns err.
func (r *run) domainFailed(ctx context.Context, rec store.Domain, err error) error {
	msg := err.Error()
	var he *Error
	if errors.As(err, &he) {
		msg = he.Message
	}
	if uerr := r.e.opts.Store.UpdateDomain(ctx, rec.Name, map[string]any{"message": bounded(msg, maxDomainMessage)}); uerr != nil && !errors.Is(uerr, store.ErrNotFound) {
		return errors.Join(err, uerr)
	}
	return err
}

// delegation records the nameservers an operator is to set for their own domain and
// whether the delegation holds yet; it never fails a build for a delegation that does
// not hold yet.
func (r *run) delegation(ctx context.Context, rec store.Domain, want []string) error {
	rec.Nameservers = strings.Join(want, " ")
	holds, _, err := r.e.CheckDelegation(ctx, rec.Name, want)
	now := r.e.now().UTC()
	rec.CheckedAt = &now
	switch {
	case err != nil:
		rec.Message = bounded("the delegation could not be checked: "+err.Error(), maxDomainMessage)
	case holds:
		rec.State, rec.Message = DomainDelegatedOK, ""
	default:
		rec.State = DomainAwaitingDelegation
		rec.Message = "set the nameservers of " + rec.Name + " at your registrar to " + strings.Join(want, ", ")
	}
	if err := r.e.opts.Store.PutDomain(ctx, rec); err != nil {
		return err
	}
	if !holds {
		r.event(store.LevelWarn, "domain", 6, "%s is not delegated yet: set its nameservers at your registrar to %s", rec.Name, strings.Join(want, ", "))
	}
	return nil
}

// CheckDelegation asks the resolver (Options.DelegationResolver, else the system's)
// for the domain's NS records and reports whether they are the nameservers wanted, and
// the ones it found.
func (e *Engine) CheckDelegation(ctx context.Context, domain string, want []string) (bool, []string, error) {
	server := e.opts.DelegationResolver
	if server == "" {
		conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(conf.Servers) == 0 {
			return false, nil, fmt.Errorf("no resolver: set domain_delegation_resolver in fedhost.hcl")
		}
		server = net.JoinHostPort(conf.Servers[0], conf.Port)
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(domain), dns.TypeNS)
	m.RecursionDesired = true
	c := &dns.Client{Timeout: 3 * time.Second}
	in, _, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		return false, nil, fmt.Errorf("asking %s: %w", server, err)
	}
	var got []string
	for _, rr := range append(in.Answer, in.Ns...) {
		if ns, ok := rr.(*dns.NS); ok && strings.EqualFold(ns.Hdr.Name, dns.Fqdn(domain)) {
			got = append(got, strings.TrimSuffix(strings.ToLower(ns.Ns), "."))
		}
		if len(got) >= 16 {
			break
		}
	}
	return len(want) > 0 && sameNames(got, want), got, nil
}

// sameNames compares nameserver sets, ignoring order, case and a final dot.
func sameNames(a, b []string) bool {
	norm := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = strings.TrimSuffix(strings.ToLower(s), ".")
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

// price formats millionths of a currency for people.
func price(micros int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", micros/1e6, micros%1e6/1e4, currency)
}

// newKey is a fresh confirmation key.
func newKey() string { return uuid.NewString() }
