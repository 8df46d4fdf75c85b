package api

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// domainRoutes are the routes of registrars, contacts, domains and usage.
func (h *handlers) domainRoutes(r fiber.Router) {
	const get, post, put = fiber.MethodGet, fiber.MethodPost, fiber.MethodPut
	h.route(r, get, "/registrars", Signed, "", h.listRegistrars)
	h.route(r, post, "/domains/check", Signed, "", h.checkDomain)
	h.route(r, get, "/domains", Signed, "", h.listDomains)
	h.route(r, get, "/contacts", Signed, "", h.listContacts)
	h.route(r, post, "/contacts", Signed, "contact.create", h.putContact)
	h.route(r, put, "/contacts/:contact", Signed, "contact.update", h.putContact)
	h.route(r, get, "/deployments/:id/domain", Owner, "", h.getDomain)
	h.route(r, post, "/deployments/:id/domain/register", Owner, "domain.register", h.registerDomain)
	h.route(r, post, "/deployments/:id/domain/transfer", Owner, "domain.transfer", h.transferDomain)
	h.route(r, post, "/deployments/:id/domain/renew", Owner, "domain.renew", h.renewDomain)
	h.route(r, put, "/deployments/:id/domain/lock", Owner, "domain.lock", h.lockDomain)
	h.route(r, put, "/deployments/:id/domain/renewal", Owner, "domain.renewal", h.setRenewal)
	h.route(r, post, "/deployments/:id/domain/authcode", Owner, "domain.authcode", h.authCode)
	h.route(r, get, "/usage", Signed, "", h.usage)
}

// Registrars names the registrar plugins of the host.
type Registrars struct {
	Registrars []string `json:"registrars"`
}

// DomainCheckRequest asks a registrar for a domain's availability and price.
type DomainCheckRequest struct {
	Registrar string `json:"registrar"`
	Domain    string `json:"domain"`
}

// DomainQuote is a registrar's answer: the price of one year the operator confirms.
type DomainQuote struct {
	Registrar          string `json:"registrar"`
	Domain             string `json:"domain"`
	Available          bool   `json:"available"`
	Reason             string `json:"reason"`
	PriceMicros        int64  `json:"price_micros"`
	Currency           string `json:"currency"`
	RenewalPriceMicros int64  `json:"renewal_price_micros"`
}

// Contact is an operator's contact for their domains.
type Contact struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Organization string `json:"organization"`
	Email        string `json:"email"`
	Phone        string `json:"phone"`
	Street       string `json:"street"`
	City         string `json:"city"`
	PostalCode   string `json:"postal_code"`
	Country      string `json:"country"`
}

// Domain is a deployment's domain and where it stands.
type Domain struct {
	Name         string        `json:"name"`
	DeploymentID string        `json:"deployment_id"`
	Mode         string        `json:"mode"`
	Registrar    string        `json:"registrar"`
	State        string        `json:"state"`
	Renewal      string        `json:"renewal"`
	ExpiresAt    *time.Time    `json:"expires_at"`
	Locked       bool          `json:"locked"`
	DNSSEC       bool          `json:"dnssec"`
	Nameservers  []string      `json:"nameservers"`
	PriceMicros  int64         `json:"price_micros"`
	Currency     string        `json:"currency"`
	Message      string        `json:"message"`
	Events       []DomainEvent `json:"events"`
}

// DomainEvent is one thing that happened to a domain, with its cost.
type DomainEvent struct {
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`
	Registrar  string    `json:"registrar"`
	CostMicros int64     `json:"cost_micros"`
	Currency   string    `json:"currency"`
	Detail     string    `json:"detail"`
}

// DomainRegisterRequest confirms a registration at the quoted price.
type DomainRegisterRequest struct {
	Registrar   string `json:"registrar"`
	Domain      string `json:"domain"`
	ContactID   string `json:"contact_id"`
	PriceMicros int64  `json:"price_micros"`
	Currency    string `json:"currency"`
}

// DomainTransferRequest moves the deployment's domain into the provider's account at
// the quoted transfer price.
type DomainTransferRequest struct {
	Registrar   string `json:"registrar"`
	Domain      string `json:"domain"`
	AuthCode    string `json:"auth_code"`
	ContactID   string `json:"contact_id"`
	PriceMicros int64  `json:"price_micros"`
	Currency    string `json:"currency"`
}

// DomainRenewRequest renews a domain now.
type DomainRenewRequest struct {
	Years int `json:"years"`
}

// DomainLockRequest sets the transfer lock.
type DomainLockRequest struct {
	Locked bool `json:"locked"`
}

// DomainRenewalRequest sets the renewal setting.
type DomainRenewalRequest struct {
	Renewal string `json:"renewal"`
}

// AuthCodeAnswer holds the code that moves a domain away.
type AuthCodeAnswer struct {
	AuthCode string `json:"auth_code"`
}

func toDomain(d store.Domain, evs []store.DomainEvent) Domain {
	out := Domain{Name: d.Name, DeploymentID: d.DeploymentID, Mode: d.Mode, Registrar: d.Registrar, State: d.State, Renewal: d.Renewal,
		ExpiresAt: d.ExpiresAt, Locked: d.Locked, DNSSEC: d.DNSSEC, Nameservers: strings.Fields(d.Nameservers),
		PriceMicros: d.PriceMicros, Currency: d.Currency, Message: d.Message, Events: []DomainEvent{}}
	if out.Nameservers == nil {
		out.Nameservers = []string{}
	}
	for _, ev := range evs {
		out.Events = append(out.Events, DomainEvent{Time: ev.Time, Kind: ev.Kind, Registrar: ev.Registrar, CostMicros: ev.CostMicros, Currency: ev.Currency, Detail: ev.Detail})
	}
	return out
}

func toContact(c store.Contact) Contact {
	return Contact{ID: c.ID, Name: c.Name, Organization: c.Organization, Email: c.Email, Phone: c.Phone, Street: c.Street, City: c.City, PostalCode: c.PostalCode, Country: c.Country}
}

func badBody(example string) error {
	return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: "send " + example}
}

func (h *handlers) listRegistrars(c *fiber.Ctx) error {
	names := h.d.Engine.Registrars()
	if names == nil {
		names = []string{}
	}
	return c.JSON(Registrars{Registrars: names})
}

func (h *handlers) checkDomain(c *fiber.Ctx) error {
	var req DomainCheckRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return badBody(`{"registrar": "porkbun", "domain": "acme.example"}`)
	}
	a, err := h.d.Engine.CheckDomain(c.UserContext(), req.Registrar, req.Domain)
	if err != nil {
		return err
	}
	return c.JSON(DomainQuote{Registrar: req.Registrar, Domain: req.Domain, Available: a.Available, Reason: a.Reason,
		PriceMicros: a.PriceMicros, Currency: a.Currency, RenewalPriceMicros: a.RenewalPriceMicros})
}

func (h *handlers) listDomains(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	owner := cl.user.ID
	if cl.user.Superuser {
		owner = ""
	}
	ds, err := h.d.Store.Domains(c.UserContext(), owner)
	if err != nil {
		return err
	}
	out := []Domain{}
	for _, d := range ds {
		out = append(out, toDomain(d, nil))
	}
	return c.JSON(out)
}

func (h *handlers) listContacts(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	cs, err := h.d.Store.Contacts(c.UserContext(), cl.user.ID)
	if err != nil {
		return err
	}
	out := []Contact{}
	for _, ct := range cs {
		out = append(out, toContact(ct))
	}
	return c.JSON(out)
}

func (h *handlers) putContact(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	var req Contact
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return badBody(`{"name", "email", "phone": "+4930123456", "street", "city", "postal_code", "country": "DE"}`)
	}
	req.ID = c.Params("contact")
	saved, err := h.d.Engine.SaveContact(c.UserContext(), cl.user.ID, store.Contact{ID: req.ID, Name: req.Name, Organization: req.Organization,
		Email: req.Email, Phone: req.Phone, Street: req.Street, City: req.City, PostalCode: req.PostalCode, Country: req.Country})
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if req.ID == "" {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(toContact(saved))
}

func (h *handlers) getDomain(c *fiber.Ctx) error {
	d, evs, err := h.d.Engine.DeploymentDomain(c.UserContext(), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(toDomain(d, evs))
}

// deploymentDomainName is the name of the domain record of the route's deployment.
func (h *handlers) deploymentDomainName(c *fiber.Ctx) (string, error) {
	d, _, err := h.d.Engine.DeploymentDomain(c.UserContext(), c.Params("id"))
	return d.Name, err
}

func (h *handlers) registerDomain(c *fiber.Ctx) error {
	var req DomainRegisterRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return badBody(`{"registrar", "contact_id", "price_micros", "currency"} as the check quoted them`)
	}
	if req.Domain == "" {
		d, err := h.d.Engine.Deployment(c.UserContext(), c.Params("id"))
		if err != nil {
			return err
		}
		req.Domain = d.Domain
	}
	rec, err := h.d.Engine.ConfirmRegistration(c.UserContext(), c.Params("id"), deploy.Confirmation{Registrar: req.Registrar, Domain: req.Domain,
		ContactID: req.ContactID, PriceMicros: req.PriceMicros, Currency: req.Currency})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(toDomain(rec, nil))
}

func (h *handlers) transferDomain(c *fiber.Ctx) error {
	var req DomainTransferRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return badBody(`{"registrar", "auth_code", "price_micros", "currency"}, the transfer price as the check quoted it`)
	}
	if req.Domain == "" {
		d, err := h.d.Engine.Deployment(c.UserContext(), c.Params("id"))
		if err != nil {
			return err
		}
		req.Domain = d.Domain
	}
	rec, err := h.d.Engine.TransferDomainIn(c.UserContext(), c.Params("id"), deploy.TransferConfirmation{AuthCode: req.AuthCode,
		Confirmation: deploy.Confirmation{Registrar: req.Registrar, Domain: req.Domain, ContactID: req.ContactID, PriceMicros: req.PriceMicros, Currency: req.Currency}})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(toDomain(rec, nil))
}

func (h *handlers) renewDomain(c *fiber.Ctx) error {
	req := DomainRenewRequest{Years: 1}
	if len(c.Body()) > 0 {
		if err := json.Unmarshal(c.Body(), &req); err != nil {
			return badBody(`{"years": 1}`)
		}
	}
	name, err := h.deploymentDomainName(c)
	if err != nil {
		return err
	}
	rec, err := h.d.Engine.RenewDomain(c.UserContext(), name, req.Years)
	if err != nil {
		return err
	}
	return c.JSON(toDomain(rec, nil))
}

func (h *handlers) lockDomain(c *fiber.Ctx) error {
	var req DomainLockRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return badBody(`{"locked": true}`)
	}
	name, err := h.deploymentDomainName(c)
	if err != nil {
		return err
	}
	rec, err := h.d.Engine.SetDomainLock(c.UserContext(), name, req.Locked)
	if err != nil {
		return err
	}
	return c.JSON(toDomain(rec, nil))
}

func (h *handlers) setRenewal(c *fiber.Ctx) error {
	var req DomainRenewalRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return badBody(`{"renewal": "auto" | "manual"}`)
	}
	name, err := h.deploymentDomainName(c)
	if err != nil {
		return err
	}
	rec, err := h.d.Engine.SetDomainRenewal(c.UserContext(), name, req.Renewal)
	if err != nil {
		return err
	}
	return c.JSON(toDomain(rec, nil))
}

func (h *handlers) authCode(c *fiber.Ctx) error {
	name, err := h.deploymentDomainName(c)
	if err != nil {
		return err
	}
	code, err := h.d.Engine.DomainAuthCode(c.UserContext(), name)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(AuthCodeAnswer{AuthCode: code})
}

// usageTime reads a query time: RFC 3339 or a date (midnight UTC).
func usageTime(c *fiber.Ctx, name string, fallback time.Time) (time.Time, error) {
	v := c.Query(name)
	if v == "" {
		return fallback, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/" + name, Message: name + " is an RFC 3339 time or a date: 2026-05-01"}
}

// usage answers the caller's usage, every operator's for a superuser (or one's, with
// ?owner=), as JSON or, with ?format=csv or Accept: text/csv, CSV.
func (h *handlers) usage(c *fiber.Ctx) error {
	cl, _ := callerOf(c)
	now := time.Now().UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	from, err := usageTime(c, "from", monthStart)
	if err != nil {
		return err
	}
	to, err := usageTime(c, "to", monthStart.AddDate(0, 1, 0))
	if err != nil {
		return err
	}
	owner := cl.user.ID
	if cl.user.Superuser {
		owner = c.Query("owner")
	}
	u, err := h.d.Engine.Usage(c.UserContext(), owner, from, to)
	if err != nil {
		return err
	}
	if c.Query("format") == "csv" || strings.Contains(c.Get(fiber.HeaderAccept), "text/csv") {
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="usage.csv"`)
		return u.WriteCSV(c.Response().BodyWriter())
	}
	return c.JSON(u)
}
