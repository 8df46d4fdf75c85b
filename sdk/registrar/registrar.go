package registrar

import (
	"context"
	"time"
)

// The Status values of a Domain that the host acts on. A driver may report other words
// of its registrar (e.g. "expired"); the host shows them as they are.
const (
	// StatusActive: registered (or transferred in) and in the account.
	StatusActive = "active"
	// StatusPending: the registry has not finished a registration or transfer yet. The
	// host follows the domain (see Follow) until its status is another.
	StatusPending = "pending"
	// StatusFailed: a pending registration or transfer ended without the domain: the
	// registry refused it, and nothing is charged or kept.
	StatusFailed = "failed"
)

// Domain is a domain as the registrar knows it.
type Domain struct {
	Name string
	// Status is StatusActive, StatusPending, StatusFailed or a word of the registrar.
	Status      string
	Expires     time.Time
	Locked      bool
	Nameservers []string
	DNSSEC      bool
}

// Availability answers whether a domain can be registered.
type Availability struct {
	Available bool
	// Reason says why not, for people.
	Reason string
	// PriceMicros is the price of one year in millionths of Currency; 0 if unknown.
	PriceMicros int64
	Currency    string
	// RenewalPriceMicros and TransferPriceMicros are one year's renewal and transfer
	// price in Currency; 0 if unknown.
	RenewalPriceMicros  int64
	TransferPriceMicros int64
}

// RegisterRequest asks for a new registration.
type RegisterRequest struct {
	Domain string
	Years  int
	// Contacts are contact ids of the registrar (see ContactManager).
	OwnerContact, AdminContact, TechContact, BillingContact string
	Nameservers                                             []string
	// PriceMicros and Currency are the price of one year the operator confirmed, as
	// Check quoted it. When set, a driver whose registrar asks a different price now
	// refuses with sdk.Invalid("price_micros", ...) (or "currency") and charges nothing;
	// 0 takes the registrar's price as it is.
	PriceMicros int64
	Currency    string
	// IdempotencyKey is the host's key of one confirmation, recorded before the call.
	// A Register repeated with the same key must not register or charge again: it
	// answers the domain as the first call left it. Drivers pass it to registrars that
	// take one and otherwise answer a domain the account already holds as it is.
	IdempotencyKey string
}

// TransferRequest asks to move a domain to this registrar.
type TransferRequest struct {
	Domain       string
	AuthCode     string
	OwnerContact string
	// PriceMicros, Currency and IdempotencyKey are as in RegisterRequest, for the
	// transfer price (Availability.TransferPriceMicros).
	PriceMicros    int64
	Currency       string
	IdempotencyKey string
}

// Contact is a registrant or other contact at the registrar. A driver refuses a bad
// country code or phone as sdk.Invalid("country", ...) or sdk.Invalid("phone", ...).
type Contact struct {
	ID           string
	Name         string
	Organization string
	Email        string
	// Phone is in E.164 form: +, country code and number (+4930123456).
	Phone      string
	Street     string
	City       string
	PostalCode string
	// Country is an ISO 3166-1 alpha-2 code.
	Country string
}

// Registrar is what every registrar driver offers.
type Registrar interface {
	Check(ctx context.Context, domain string) (Availability, error)
	Register(ctx context.Context, req RegisterRequest) (Domain, error)
	Renew(ctx context.Context, domain string, years int) (Domain, error)
	SetNameservers(ctx context.Context, domain string, nameservers []string) (Domain, error)
	// Snapshot lists every domain of the account, with its expiry, for renewal and
	// release events.
	Snapshot(ctx context.Context) ([]Domain, error)
}

// DomainReader reads one domain of the account, or one being transferred in: how a
// pending registration or transfer is followed (see Follow). An unknown domain is
// sdk.CodeNotFound.
type DomainReader interface {
	Domain(ctx context.Context, name string) (Domain, error)
}

// Transferer moves domains in and hands out auth codes to move them away. A transfer
// usually answers StatusPending first; a wrong auth code is sdk.Invalid("auth_code", ...).
// A driver whose registrar hands out no auth codes answers AuthCode sdk.CodeUnsupported.
type Transferer interface {
	Transfer(ctx context.Context, req TransferRequest) (Domain, error)
	AuthCode(ctx context.Context, domain string) (string, error)
}

// Locker sets the registrar's transfer lock.
type Locker interface {
	SetLock(ctx context.Context, domain string, locked bool) (Domain, error)
}

// DNSSECRemover removes DNSSEC keys, as a move to other nameservers needs.
type DNSSECRemover interface {
	RemoveDNSSEC(ctx context.Context, domain string) (Domain, error)
}

// ContactManager keeps contacts. PutContact creates a contact when ID is empty and
// updates it otherwise.
type ContactManager interface {
	PutContact(ctx context.Context, c Contact) (Contact, error)
	GetContact(ctx context.Context, id string) (Contact, error)
	ListContacts(ctx context.Context) ([]Contact, error)
	DeleteContact(ctx context.Context, id string) error
}
