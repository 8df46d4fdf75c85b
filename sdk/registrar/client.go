package registrar

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
)

func init() {
	wire.Clients[sdk.KindRegistrar] = func(cc grpc.ClientConnInterface) any { return &Client{rpc: pb.NewRegistrarClient(cc)} }
}

// Client calls a registrar plugin; get one from the client package. Its methods return
// *sdk.Error values, with sdk.CodeUnsupported for what the driver does not offer.
type Client struct {
	rpc pb.RegistrarClient
}

func domainFromProto(d *pb.Domain) Domain {
	var expires time.Time
	if d.GetExpiresUnix() != 0 {
		expires = time.Unix(d.GetExpiresUnix(), 0).UTC()
	}
	return Domain{Name: d.GetName(), Status: d.GetStatus(), Expires: expires, Locked: d.GetLocked(), Nameservers: d.GetNameservers(), DNSSEC: d.GetDnssec()}
}

func domainResult(r *pb.DomainResponse, err error) (Domain, error) {
	if err != nil {
		return Domain{}, wire.FromStatus(err)
	}
	return domainFromProto(r.GetDomain()), nil
}

// Check asks whether domain can be registered.
func (c *Client) Check(ctx context.Context, domain string) (Availability, error) {
	r, err := c.rpc.Check(ctx, &pb.DomainRequest{Domain: domain})
	if err != nil {
		return Availability{}, wire.FromStatus(err)
	}
	return Availability{Available: r.GetAvailable(), Reason: r.GetReason(), PriceMicros: r.GetPriceMicros(), Currency: r.GetCurrency(),
		RenewalPriceMicros: r.GetRenewalPriceMicros(), TransferPriceMicros: r.GetTransferPriceMicros()}, nil
}

// Register registers a domain.
func (c *Client) Register(ctx context.Context, req RegisterRequest) (Domain, error) {
	return domainResult(c.rpc.Register(ctx, &pb.RegisterRequest{
		Domain: req.Domain, Years: int32(req.Years),
		OwnerContact: req.OwnerContact, AdminContact: req.AdminContact,
		TechContact: req.TechContact, BillingContact: req.BillingContact,
		Nameservers: req.Nameservers,
		PriceMicros: req.PriceMicros, Currency: req.Currency, IdempotencyKey: req.IdempotencyKey,
	}))
}

// Renew renews a domain for years.
func (c *Client) Renew(ctx context.Context, domain string, years int) (Domain, error) {
	return domainResult(c.rpc.Renew(ctx, &pb.RenewRequest{Domain: domain, Years: int32(years)}))
}

// SetNameservers delegates a domain.
func (c *Client) SetNameservers(ctx context.Context, domain string, nameservers []string) (Domain, error) {
	return domainResult(c.rpc.SetNameservers(ctx, &pb.NameserversRequest{Domain: domain, Nameservers: nameservers}))
}

// Snapshot lists the account's domains.
func (c *Client) Snapshot(ctx context.Context) ([]Domain, error) {
	r, err := c.rpc.Snapshot(ctx, &pb.SnapshotRequest{})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]Domain, len(r.GetDomains()))
	for i, d := range r.GetDomains() {
		out[i] = domainFromProto(d)
	}
	return out, nil
}

// Transfer moves a domain to this registrar.
func (c *Client) Transfer(ctx context.Context, req TransferRequest) (Domain, error) {
	return domainResult(c.rpc.Transfer(ctx, &pb.TransferRequest{Domain: req.Domain, AuthCode: req.AuthCode, OwnerContact: req.OwnerContact,
		PriceMicros: req.PriceMicros, Currency: req.Currency, IdempotencyKey: req.IdempotencyKey}))
}

// Domain reads one domain; a plugin of an sdk without the call answers sdk.CodeUnsupported.
func (c *Client) Domain(ctx context.Context, name string) (Domain, error) {
	return domainResult(c.rpc.GetDomain(ctx, &pb.DomainRequest{Domain: name}))
}

// AuthCode returns the code that moves domain away.
func (c *Client) AuthCode(ctx context.Context, domain string) (string, error) {
	r, err := c.rpc.AuthCode(ctx, &pb.DomainRequest{Domain: domain})
	if err != nil {
		return "", wire.FromStatus(err)
	}
	return r.GetAuthCode(), nil
}

// SetLock sets the transfer lock.
func (c *Client) SetLock(ctx context.Context, domain string, locked bool) (Domain, error) {
	return domainResult(c.rpc.SetLock(ctx, &pb.LockRequest{Domain: domain, Locked: locked}))
}

// RemoveDNSSEC removes DNSSEC keys.
func (c *Client) RemoveDNSSEC(ctx context.Context, domain string) (Domain, error) {
	return domainResult(c.rpc.RemoveDNSSEC(ctx, &pb.DomainRequest{Domain: domain}))
}

// PutContact creates or updates a contact.
func (c *Client) PutContact(ctx context.Context, ct Contact) (Contact, error) {
	r, err := c.rpc.PutContact(ctx, contactToProto(ct))
	if err != nil {
		return Contact{}, wire.FromStatus(err)
	}
	return contactFromProto(r), nil
}

// GetContact reads a contact.
func (c *Client) GetContact(ctx context.Context, id string) (Contact, error) {
	r, err := c.rpc.GetContact(ctx, &pb.ContactRequest{Id: id})
	if err != nil {
		return Contact{}, wire.FromStatus(err)
	}
	return contactFromProto(r), nil
}

// ListContacts lists contacts.
func (c *Client) ListContacts(ctx context.Context) ([]Contact, error) {
	r, err := c.rpc.ListContacts(ctx, &pb.ListContactsRequest{})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]Contact, len(r.GetContacts()))
	for i, ct := range r.GetContacts() {
		out[i] = contactFromProto(ct)
	}
	return out, nil
}

// DeleteContact deletes a contact.
func (c *Client) DeleteContact(ctx context.Context, id string) error {
	_, err := c.rpc.DeleteContact(ctx, &pb.ContactRequest{Id: id})
	return wire.FromStatus(err)
}

var (
	_ Registrar      = (*Client)(nil)
	_ DomainReader   = (*Client)(nil)
	_ Transferer     = (*Client)(nil)
	_ Locker         = (*Client)(nil)
	_ DNSSECRemover  = (*Client)(nil)
	_ ContactManager = (*Client)(nil)
)
