package registrar

import (
	"context"
	"time"
)

// Domain is a domain as the registrar knows it.
type Domain struct {
	Name        string
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
}

// RegisterRequest asks for a new registration.
type RegisterRequest struct {
	Domain string
	Years  int
	// Contacts are contact ids of the registrar (see ContactManager).
	OwnerContact, AdminContact, TechContact, BillingContact string
	Nameservers                                             []string
}

// TransferRequest asks to move a domain to this registrar.
type TransferRequest struct {
	Domain       string
	AuthCode     string
	OwnerContact string
}

// Contact is a registrant or other contact at the registrar.
type Contact struct {
	ID           string
	Name         string
	Organization string
	Email        string
	Phone        string
	Street       string
	City         string
	PostalCode   string
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

// Transferer moves domains in and hands out auth codes to move them away.
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
