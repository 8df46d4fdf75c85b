// Command registrar is the registrar driver the tests of conformance.Registrar run
// against: a registry of its own in memory that offers every optional ability (one-domain
// reads, transfers and auth codes, the lock, contacts), so that each check of the kit
// meets a driver that passes it.
package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// The registry the kit's test describes in its case.
const (
	taken        = "taken.test"
	pendingName  = "slow.test"
	renewable    = "old.test"
	incoming     = "incoming.test"
	incomingCode = "In-Code-42"
	pendingFor   = 1500 * time.Millisecond
	priceMicros  = 9_730_000
)

type domain struct {
	registrar.Domain
	pendingUntil time.Time
	key          string
}

type memory struct {
	mu       sync.Mutex
	domains  map[string]*domain
	contacts map[string]registrar.Contact
	nextID   int
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func checkName(field, name string) error {
	labels := strings.Split(name, ".")
	if len(labels) < 2 || len(name) > 253 {
		return sdk.Invalid(field, "not a domain name of at least two labels")
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return sdk.Invalid(field, "not a domain name")
		}
	}
	return nil
}

func (m *memory) get(name string) (*domain, bool) {
	d, ok := m.domains[name]
	if ok && d.Status == registrar.StatusPending && time.Now().After(d.pendingUntil) {
		d.Status = registrar.StatusActive
	}
	return d, ok
}

func (m *memory) Check(_ context.Context, name string) (registrar.Availability, error) {
	if err := checkName("domain", name); err != nil {
		return registrar.Availability{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a := registrar.Availability{Available: true, PriceMicros: priceMicros, Currency: "EUR", RenewalPriceMicros: priceMicros, TransferPriceMicros: priceMicros}
	if _, held := m.get(name); held || name == taken || name == incoming {
		a.Available, a.Reason = false, "registered already"
	}
	return a, nil
}

func (m *memory) Register(_ context.Context, req registrar.RegisterRequest) (registrar.Domain, error) {
	if err := checkName("domain", req.Domain); err != nil {
		return registrar.Domain{}, err
	}
	if req.Years < 0 || req.Years > 10 {
		return registrar.Domain{}, sdk.Invalid("years", "register for 1 to 10 years")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.get(req.Domain); ok && req.IdempotencyKey != "" && d.key == req.IdempotencyKey {
		return d.Domain, nil
	}
	if req.PriceMicros != 0 && req.PriceMicros != priceMicros {
		return registrar.Domain{}, sdk.Invalid("price_micros", "the price changed: check again")
	}
	if _, held := m.get(req.Domain); held || req.Domain == taken || req.Domain == incoming {
		return registrar.Domain{}, sdk.Invalid("domain", "registered already")
	}
	years := max(req.Years, 1)
	d := &domain{Domain: registrar.Domain{Name: req.Domain, Status: registrar.StatusActive,
		Expires: time.Now().UTC().AddDate(years, 0, 0), Nameservers: []string{"ns1.memory.test", "ns2.memory.test"}}, key: req.IdempotencyKey}
	if req.Domain == pendingName {
		d.Status, d.pendingUntil = registrar.StatusPending, time.Now().Add(pendingFor)
	}
	m.domains[req.Domain] = d
	return d.Domain, nil
}

func (m *memory) Renew(_ context.Context, name string, years int) (registrar.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.get(name)
	if !ok {
		return registrar.Domain{}, sdk.NotFound("not in the account")
	}
	d.Expires = d.Expires.AddDate(max(years, 1), 0, 0)
	return d.Domain, nil
}

func (m *memory) SetNameservers(_ context.Context, name string, ns []string) (registrar.Domain, error) {
	if err := checkName("domain", name); err != nil {
		return registrar.Domain{}, err
	}
	for i, n := range ns {
		if err := checkName(fmt.Sprintf("nameservers/%d", i), n); err != nil {
			return registrar.Domain{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.get(name)
	if !ok {
		return registrar.Domain{}, sdk.NotFound("not in the account")
	}
	d.Nameservers = slices.Clone(ns)
	return d.Domain, nil
}

func (m *memory) Snapshot(context.Context) ([]registrar.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []registrar.Domain
	for name := range m.domains {
		d, _ := m.get(name)
		out = append(out, d.Domain)
	}
	return out, nil
}

func (m *memory) Domain(_ context.Context, name string) (registrar.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.get(name)
	if !ok {
		return registrar.Domain{}, sdk.NotFound("not in the account")
	}
	return d.Domain, nil
}

func (m *memory) Transfer(_ context.Context, req registrar.TransferRequest) (registrar.Domain, error) {
	if err := checkName("domain", req.Domain); err != nil {
		return registrar.Domain{}, err
	}
	if req.AuthCode == "" {
		return registrar.Domain{}, sdk.Invalid("auth_code", "give the auth code")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.Domain != incoming || req.AuthCode != incomingCode {
		return registrar.Domain{}, sdk.Invalid("auth_code", "the registry refused the auth code")
	}
	d := &domain{Domain: registrar.Domain{Name: req.Domain, Status: registrar.StatusPending, Expires: time.Now().UTC().AddDate(1, 0, 0)},
		pendingUntil: time.Now().Add(pendingFor)}
	m.domains[req.Domain] = d
	return d.Domain, nil
}

func (m *memory) AuthCode(_ context.Context, name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.get(name); !ok {
		return "", sdk.NotFound("not in the account")
	}
	return "code-of-" + strings.ReplaceAll(name, ".", "-"), nil
}

func (m *memory) SetLock(_ context.Context, name string, locked bool) (registrar.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.get(name)
	if !ok {
		return registrar.Domain{}, sdk.NotFound("not in the account")
	}
	d.Locked = locked
	return d.Domain, nil
}

var (
	countryRE = regexp.MustCompile(`^[A-Z]{2}$`)
	phoneRE   = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
)

func (m *memory) PutContact(_ context.Context, c registrar.Contact) (registrar.Contact, error) {
	if !countryRE.MatchString(c.Country) {
		return registrar.Contact{}, sdk.Invalid("country", "give an ISO 3166-1 alpha-2 code (DE)")
	}
	if !phoneRE.MatchString(c.Phone) {
		return registrar.Contact{}, sdk.Invalid("phone", "give the number in E.164 form (+4930123456)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.ID == "" {
		m.nextID++
		c.ID = fmt.Sprintf("C%d", m.nextID)
	} else if _, ok := m.contacts[c.ID]; !ok {
		return registrar.Contact{}, sdk.NotFound("no such contact")
	}
	m.contacts[c.ID] = c
	return c, nil
}

func (m *memory) GetContact(_ context.Context, id string) (registrar.Contact, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.contacts[id]
	if !ok {
		return registrar.Contact{}, sdk.NotFound("no such contact")
	}
	return c, nil
}

func (m *memory) ListContacts(context.Context) ([]registrar.Contact, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []registrar.Contact
	for _, c := range m.contacts {
		out = append(out, c)
	}
	return out, nil
}

func (m *memory) DeleteContact(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.contacts, id)
	return nil
}

func main() {
	m := &memory{domains: map[string]*domain{}, contacts: map[string]registrar.Contact{}}
	m.domains[renewable] = &domain{Domain: registrar.Domain{Name: renewable, Status: registrar.StatusActive, Expires: time.Now().UTC().AddDate(0, 3, 0)}}
	registrar.Serve(sdk.Description{Name: "memory", Version: "0.1.0", Summary: "A registry in memory, for the kit's tests", Serves: []string{"test"}}, m)
}

var (
	_ registrar.DomainReader   = (*memory)(nil)
	_ registrar.Transferer     = (*memory)(nil)
	_ registrar.Locker         = (*memory)(nil)
	_ registrar.ContactManager = (*memory)(nil)
)
