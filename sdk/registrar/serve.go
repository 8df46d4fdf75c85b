package registrar

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
	"github.com/fedhost/fedhost/sdk/internal/wire"
)

// Serve runs r as a registrar plugin until the host stops it. desc.Serves lists the top
// level domains it registers ("*" for any). Call it from main; it does not return.
func Serve(desc sdk.Description, r Registrar, opts ...sdk.ServeOption) {
	desc.Kind = sdk.KindRegistrar
	var configure func(context.Context, json.RawMessage) error
	if c, ok := r.(sdk.Configurer); ok {
		configure = c.Configure
	}
	s := &server{r: r}
	wire.ServeKind(desc, configure, func(g *grpc.Server) { pb.RegisterRegistrarServer(g, s) }, opts)
}

type server struct {
	pb.UnimplementedRegistrarServer
	r Registrar
}

func unsupported(what string) error {
	return wire.ToStatus(sdk.Errorf(sdk.CodeUnsupported, "this registrar driver does not %s", what))
}

func domainToProto(d Domain) *pb.Domain {
	var expires int64
	if !d.Expires.IsZero() {
		expires = d.Expires.Unix()
	}
	return &pb.Domain{Name: d.Name, Status: d.Status, ExpiresUnix: expires, Locked: d.Locked, Nameservers: d.Nameservers, Dnssec: d.DNSSEC}
}

func contactToProto(c Contact) *pb.Contact {
	return &pb.Contact{Id: c.ID, Name: c.Name, Organization: c.Organization, Email: c.Email, Phone: c.Phone,
		Street: c.Street, City: c.City, PostalCode: c.PostalCode, Country: c.Country}
}

func contactFromProto(c *pb.Contact) Contact {
	return Contact{ID: c.GetId(), Name: c.GetName(), Organization: c.GetOrganization(), Email: c.GetEmail(),
		Phone: c.GetPhone(), Street: c.GetStreet(), City: c.GetCity(), PostalCode: c.GetPostalCode(), Country: c.GetCountry()}
}

func domainResponse(d Domain, err error) (*pb.DomainResponse, error) {
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.DomainResponse{Domain: domainToProto(d)}, nil
}

func (s *server) Check(ctx context.Context, req *pb.DomainRequest) (*pb.CheckResponse, error) {
	a, err := s.r.Check(ctx, req.GetDomain())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.CheckResponse{Available: a.Available, Reason: a.Reason, PriceMicros: a.PriceMicros, Currency: a.Currency,
		RenewalPriceMicros: a.RenewalPriceMicros, TransferPriceMicros: a.TransferPriceMicros}, nil
}

func (s *server) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.DomainResponse, error) {
	return domainResponse(s.r.Register(ctx, RegisterRequest{
		Domain: req.GetDomain(), Years: int(req.GetYears()),
		OwnerContact: req.GetOwnerContact(), AdminContact: req.GetAdminContact(),
		TechContact: req.GetTechContact(), BillingContact: req.GetBillingContact(),
		Nameservers: req.GetNameservers(),
		PriceMicros: req.GetPriceMicros(), Currency: req.GetCurrency(), IdempotencyKey: req.GetIdempotencyKey(),
	}))
}

func (s *server) Renew(ctx context.Context, req *pb.RenewRequest) (*pb.DomainResponse, error) {
	return domainResponse(s.r.Renew(ctx, req.GetDomain(), int(req.GetYears())))
}

func (s *server) SetNameservers(ctx context.Context, req *pb.NameserversRequest) (*pb.DomainResponse, error) {
	return domainResponse(s.r.SetNameservers(ctx, req.GetDomain(), req.GetNameservers()))
}

func (s *server) Snapshot(ctx context.Context, _ *pb.SnapshotRequest) (*pb.SnapshotResponse, error) {
	domains, err := s.r.Snapshot(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := make([]*pb.Domain, len(domains))
	for i, d := range domains {
		out[i] = domainToProto(d)
	}
	return &pb.SnapshotResponse{Domains: out}, nil
}

func (s *server) Transfer(ctx context.Context, req *pb.TransferRequest) (*pb.DomainResponse, error) {
	t, ok := s.r.(Transferer)
	if !ok {
		return nil, unsupported("transfer domains")
	}
	return domainResponse(t.Transfer(ctx, TransferRequest{Domain: req.GetDomain(), AuthCode: req.GetAuthCode(), OwnerContact: req.GetOwnerContact(),
		PriceMicros: req.GetPriceMicros(), Currency: req.GetCurrency(), IdempotencyKey: req.GetIdempotencyKey()}))
}

func (s *server) GetDomain(ctx context.Context, req *pb.DomainRequest) (*pb.DomainResponse, error) {
	r, ok := s.r.(DomainReader)
	if !ok {
		return nil, unsupported("read single domains")
	}
	return domainResponse(r.Domain(ctx, req.GetDomain()))
}

func (s *server) AuthCode(ctx context.Context, req *pb.DomainRequest) (*pb.AuthCodeResponse, error) {
	t, ok := s.r.(Transferer)
	if !ok {
		return nil, unsupported("give auth codes")
	}
	code, err := t.AuthCode(ctx, req.GetDomain())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.AuthCodeResponse{AuthCode: code}, nil
}

func (s *server) SetLock(ctx context.Context, req *pb.LockRequest) (*pb.DomainResponse, error) {
	l, ok := s.r.(Locker)
	if !ok {
		return nil, unsupported("lock domains")
	}
	return domainResponse(l.SetLock(ctx, req.GetDomain(), req.GetLocked()))
}

func (s *server) RemoveDNSSEC(ctx context.Context, req *pb.DomainRequest) (*pb.DomainResponse, error) {
	d, ok := s.r.(DNSSECRemover)
	if !ok {
		return nil, unsupported("remove DNSSEC")
	}
	return domainResponse(d.RemoveDNSSEC(ctx, req.GetDomain()))
}

func (s *server) contacts() (ContactManager, error) {
	c, ok := s.r.(ContactManager)
	if !ok {
		return nil, unsupported("manage contacts")
	}
	return c, nil
}

func (s *server) PutContact(ctx context.Context, req *pb.Contact) (*pb.Contact, error) {
	cm, err := s.contacts()
	if err != nil {
		return nil, err
	}
	c, err := cm.PutContact(ctx, contactFromProto(req))
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return contactToProto(c), nil
}

func (s *server) GetContact(ctx context.Context, req *pb.ContactRequest) (*pb.Contact, error) {
	cm, err := s.contacts()
	if err != nil {
		return nil, err
	}
	c, err := cm.GetContact(ctx, req.GetId())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return contactToProto(c), nil
}

func (s *server) ListContacts(ctx context.Context, _ *pb.ListContactsRequest) (*pb.ListContactsResponse, error) {
	cm, err := s.contacts()
	if err != nil {
		return nil, err
	}
	cs, err := cm.ListContacts(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := make([]*pb.Contact, len(cs))
	for i, c := range cs {
		out[i] = contactToProto(c)
	}
	return &pb.ListContactsResponse{Contacts: out}, nil
}

func (s *server) DeleteContact(ctx context.Context, req *pb.ContactRequest) (*pb.DeleteContactResponse, error) {
	cm, err := s.contacts()
	if err != nil {
		return nil, err
	}
	return &pb.DeleteContactResponse{}, wire.ToStatus(cm.DeleteContact(ctx, req.GetId()))
}
