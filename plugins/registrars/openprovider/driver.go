package main

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
	"github.com/fedhost/fedhost/plugins/registrars/internal/wirevalue"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// driver serves the registrar contract on one Openprovider reseller account.
type driver struct {
	mu  sync.Mutex
	cfg *config
	api *api
}

func (d *driver) client() (*api, *config, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.api == nil {
		return nil, nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first call")
	}
	return d.api, d.cfg, nil
}

// domainName is the API's split of a domain: the first label and the rest.
type domainName struct {
	Name      string `json:"name"`
	Extension string `json:"extension"`
}

func split(name string) domainName {
	label, ext, _ := strings.Cut(name, ".")
	return domainName{Name: label, Extension: ext}
}

type nameserver struct {
	Name  string `json:"name"`
	SeqNr int    `json:"seq_nr,omitempty"`
}

func nameservers(ns []string) []nameserver {
	out := make([]nameserver, len(ns))
	for i, n := range ns {
		out[i] = nameserver{Name: n, SeqNr: i + 1}
	}
	return out
}

// opDomain is a domain as GET domains and GET domains/{id} give it.
type opDomain struct {
	ID             wirevalue.Number `json:"id"`
	Domain         domainName       `json:"domain"`
	Status         string           `json:"status"`
	ExpirationDate wirevalue.Time   `json:"expiration_date"`
	RegistryExpiry wirevalue.Time   `json:"registry_expiration_date"`
	DNSSECEnabled  wirevalue.Flag   `json:"is_dnssec_enabled"`
	IsLocked       wirevalue.Flag   `json:"is_locked"`
	NameServers    []nameserver     `json:"name_servers"`
	DNSSECKeys     []struct {
		Flags wirevalue.Number `json:"flags"`
	} `json:"dnssec_keys"`
}

func (o opDomain) toDomain() registrar.Domain {
	ns := make([]string, 0, len(o.NameServers))
	for _, n := range o.NameServers {
		if len(ns) < 13 {
			ns = append(ns, reqcheck.Text(strings.ToLower(n.Name), 253))
		}
	}
	name := o.Domain.Name + "." + o.Domain.Extension
	expires := time.Time(o.ExpirationDate)
	if expires.IsZero() {
		expires = time.Time(o.RegistryExpiry)
	}
	return registrar.Domain{Name: reqcheck.Text(strings.ToLower(name), 253), Status: status(o.Status),
		Expires: expires, Locked: bool(o.IsLocked), Nameservers: ns, DNSSEC: bool(o.DNSSECEnabled) || len(o.DNSSECKeys) > 0}
}

// status names a domain's state in the contract's words. Openprovider's three-letter
// statuses: ACT active; REQ requested and PEN pending at the registry; FAI failed.
func status(s string) string {
	switch u := strings.ToUpper(strings.TrimSpace(s)); u {
	case "ACT":
		return registrar.StatusActive
	case "REQ", "PEN":
		return registrar.StatusPending
	case "FAI":
		return registrar.StatusFailed
	}
	return reqcheck.Text(strings.ToLower(s), 64)
}

// find looks a domain of the account up by its name; ok is false when the account
// does not hold it.
func (d *driver) find(ctx context.Context, a *api, name string) (opDomain, bool, error) {
	var res struct {
		Results []opDomain `json:"results"`
	}
	q := url.Values{"full_name": {name}, "limit": {"1"}}
	if err := a.do(ctx, "GET", "domains", q, nil, &res, "domain"); err != nil {
		return opDomain{}, false, err
	}
	for _, o := range res.Results {
		if strings.EqualFold(o.Domain.Name+"."+o.Domain.Extension, name) && o.ID > 0 {
			return o, true, nil
		}
	}
	return opDomain{}, false, nil
}

// mustFind is find for calls on a domain the account must hold.
func (d *driver) mustFind(ctx context.Context, a *api, name string) (opDomain, error) {
	o, ok, err := d.find(ctx, a, name)
	if err == nil && !ok {
		err = sdk.NotFound("the Openprovider account holds no such domain")
	}
	return o, err
}

// settle reads the domain until the registry has ended what is pending, for at most
// pending_wait_seconds; a domain still pending then is returned with status pending, to
// be followed.
func (d *driver) settle(ctx context.Context, a *api, cfg *config, id wirevalue.Number) (registrar.Domain, error) {
	deadline := time.Now().Add(cfg.pendingWait)
	for {
		var o opDomain
		if err := a.do(ctx, "GET", fmt.Sprintf("domains/%d", id), nil, nil, &o, "domain"); err != nil {
			return registrar.Domain{}, err
		}
		dom := o.toDomain()
		if dom.Status != registrar.StatusPending || !time.Now().Before(deadline) {
			return dom, nil
		}
		select {
		case <-ctx.Done():
			return dom, nil
		case <-time.After(min(cfg.poll, time.Until(deadline))):
		}
	}
}

// quote is one price of the API: what the reseller pays, and the product's list price.
type quote struct {
	Reseller struct {
		Price    wirevalue.Price `json:"price"`
		Currency string          `json:"currency"`
	} `json:"reseller"`
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// price reads a domain's price for operation (renew, transfer) from GET domains/prices.
func (d *driver) price(ctx context.Context, a *api, name, operation string) (int64, error) {
	n := split(name)
	var res struct {
		Price quote `json:"price"`
	}
	q := url.Values{"domain.name": {n.Name}, "domain.extension": {n.Extension}, "operation": {operation}, "period": {"1"}}
	if err := a.do(ctx, "GET", "domains/prices", q, nil, &res, "domain"); err != nil {
		return 0, err
	}
	return int64(res.Price.Reseller.Price), nil
}

// Check posts domains/check with_price; the price is the reseller's for one year.
// Renewal and transfer prices come from domains/prices.
func (d *driver) Check(ctx context.Context, domain string) (registrar.Availability, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Availability{}, err
	}
	a, _, err := d.client()
	if err != nil {
		return registrar.Availability{}, err
	}
	var res struct {
		Results []struct {
			Domain    string         `json:"domain"`
			Status    string         `json:"status"`
			Reason    string         `json:"reason"`
			IsPremium wirevalue.Flag `json:"is_premium"`
			Price     quote          `json:"price"`
		} `json:"results"`
	}
	body := map[string]any{"domains": []domainName{split(name)}, "with_price": true}
	if err := a.do(ctx, "POST", "domains/check", nil, body, &res, "domain"); err != nil {
		return registrar.Availability{}, err
	}
	for _, r := range res.Results {
		if !strings.EqualFold(r.Domain, name) {
			continue
		}
		av := registrar.Availability{Available: strings.EqualFold(r.Status, "free"), PriceMicros: int64(r.Price.Reseller.Price)}
		if c := strings.ToUpper(r.Price.Reseller.Currency); currencyCode.MatchString(c) {
			av.Currency = c
		}
		if av.Available && bool(r.IsPremium) {
			// A premium name is priced apart from the quote above; it is not offered
			// rather than charged at a price nobody confirmed.
			av.Available, av.Reason = false, "a premium domain, priced apart: register it at Openprovider itself"
			return av, nil
		}
		if !av.Available {
			av.Reason = "Openprovider says: " + reqcheck.Text(r.Status, 32)
			if r.Reason != "" {
				av.Reason += " (" + reqcheck.Text(r.Reason, 120) + ")"
			}
			return av, nil
		}
		if av.RenewalPriceMicros, err = d.price(ctx, a, name, "renew"); err != nil {
			return registrar.Availability{}, err
		}
		if av.TransferPriceMicros, err = d.price(ctx, a, name, "transfer"); err != nil {
			return registrar.Availability{}, err
		}
		return av, nil
	}
	return registrar.Availability{}, sdk.Errorf(sdk.CodeInternal, "Openprovider domains/check answered without the domain asked for")
}

// confirm refuses an order whose confirmed price or currency is not what Openprovider
// asks now, before anything is charged; a zero price confirms nothing.
func confirm(confirmed int64, currency string, asked int64, askedCurrency string) error {
	if currency != "" && currency != askedCurrency {
		return sdk.Invalid("currency", "Openprovider quotes in %s, not in the currency confirmed: check the domain again and confirm its price", askedCurrency)
	}
	if confirmed != 0 && confirmed != asked {
		return sdk.Invalid("price_micros", "Openprovider asks %s %s a year now, not the price confirmed: check the domain again and confirm the new price",
			reqcheck.FormatMicros(asked), askedCurrency)
	}
	return nil
}

// handle is the shape of an Openprovider customer handle (JD000001-NL).
var handle = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)

func contactHandle(field, id string) (string, error) {
	if !handle.MatchString(id) {
		return "", sdk.Invalid(field, "give the handle of an Openprovider customer (as PutContact returns: letters, digits and hyphens)")
	}
	return id, nil
}

// handles fills the four handles of an order; the owner stands in for one not given.
func handles(body map[string]any, owner, admin, tech, billing string) error {
	o, err := contactHandle("owner_contact", owner)
	if err != nil {
		return err
	}
	body["owner_handle"] = o
	for _, c := range []struct{ field, key, id string }{
		{"admin_contact", "admin_handle", admin}, {"tech_contact", "tech_handle", tech}, {"billing_contact", "billing_handle", billing},
	} {
		body[c.key] = o
		if c.id != "" {
			if body[c.key], err = contactHandle(c.field, c.id); err != nil {
				return err
			}
		}
	}
	return nil
}

// order places a registration or transfer: a domain the account holds already is
// answered as it is (the API takes no idempotency key, so this is how a repeated
// confirmation charges nothing); a domain to register must be available; a confirmed
// price is checked, then the contact handles, before anything is ordered.
func (d *driver) order(ctx context.Context, name, path string, body map[string]any, confirmed int64, currency string, transfer bool, contacts func() error) (registrar.Domain, error) {
	a, cfg, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	if o, ok, err := d.find(ctx, a, name); err != nil || ok {
		return o.toDomain(), err
	}
	if !transfer || confirmed != 0 || currency != "" {
		av, err := d.Check(ctx, name)
		if err != nil {
			return registrar.Domain{}, err
		}
		if !transfer && !av.Available {
			return registrar.Domain{}, sdk.Invalid("domain", "Openprovider cannot register this domain (%s): choose another", av.Reason)
		}
		asked := av.PriceMicros
		if transfer {
			asked = av.TransferPriceMicros
		}
		if err := confirm(confirmed, currency, asked, av.Currency); err != nil {
			return registrar.Domain{}, err
		}
	}
	if err := contacts(); err != nil {
		return registrar.Domain{}, err
	}
	field := "domain"
	if transfer {
		field = "auth_code"
	}
	var res struct {
		ID wirevalue.Number `json:"id"`
	}
	if err := a.do(ctx, "POST", path, nil, body, &res, field); err != nil {
		return registrar.Domain{}, err
	}
	if res.ID <= 0 {
		return registrar.Domain{}, sdk.Errorf(sdk.CodeInternal, "Openprovider %s answered without the domain's id", path)
	}
	return d.settle(ctx, a, cfg, res.ID)
}

// Register posts domains with the handles and nameservers.
func (d *driver) Register(ctx context.Context, req registrar.RegisterRequest) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", req.Domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	years, err := reqcheck.Years("years", req.Years)
	if err != nil {
		return registrar.Domain{}, err
	}
	body := map[string]any{"domain": split(name), "period": years, "autorenew": "off"}
	if len(req.Nameservers) > 0 {
		ns, err := reqcheck.Nameservers("nameservers", req.Nameservers)
		if err != nil {
			return registrar.Domain{}, err
		}
		body["name_servers"] = nameservers(ns)
	}
	return d.order(ctx, name, "domains", body, req.PriceMicros, req.Currency, false, func() error {
		return handles(body, req.OwnerContact, req.AdminContact, req.TechContact, req.BillingContact)
	})
}

// Transfer posts domains/transfer with the auth code and the owner's handle.
func (d *driver) Transfer(ctx context.Context, req registrar.TransferRequest) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", req.Domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if req.AuthCode == "" || len(req.AuthCode) > 255 || strings.ContainsFunc(req.AuthCode, func(r rune) bool { return r < ' ' }) {
		return registrar.Domain{}, sdk.Invalid("auth_code", "give the auth code the losing registrar handed out (1 to 255 printable characters)")
	}
	body := map[string]any{"domain": split(name), "auth_code": req.AuthCode, "period": 1, "autorenew": "off"}
	return d.order(ctx, name, "domains/transfer", body, req.PriceMicros, req.Currency, true, func() error {
		return handles(body, req.OwnerContact, "", "", "")
	})
}

// Domain reads one domain of the account.
func (d *driver) Domain(ctx context.Context, domain string) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	a, _, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	o, err := d.mustFind(ctx, a, name)
	if err != nil {
		return registrar.Domain{}, err
	}
	return o.toDomain(), nil
}

// AuthCode reads GET domains/{id}/authcode.
func (d *driver) AuthCode(ctx context.Context, domain string) (string, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return "", err
	}
	a, _, err := d.client()
	if err != nil {
		return "", err
	}
	o, err := d.mustFind(ctx, a, name)
	if err != nil {
		return "", err
	}
	var res struct {
		AuthCode string `json:"auth_code"`
	}
	q := url.Values{"auth_code_type": {"external"}}
	if err := a.do(ctx, "GET", fmt.Sprintf("domains/%d/authcode", o.ID), q, nil, &res, "domain"); err != nil {
		return "", err
	}
	if res.AuthCode == "" || len(res.AuthCode) > 255 {
		return "", sdk.NotFound("Openprovider gives no auth code for this domain (its registry may send it to the owner's e-mail address instead)")
	}
	return res.AuthCode, nil
}

// update puts a change of a domain and reads it back once the registry has it.
func (d *driver) update(ctx context.Context, domain string, body map[string]any, field string) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	a, cfg, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	o, err := d.mustFind(ctx, a, name)
	if err != nil {
		return registrar.Domain{}, err
	}
	if err := a.do(ctx, "PUT", fmt.Sprintf("domains/%d", o.ID), nil, body, nil, field); err != nil {
		return registrar.Domain{}, err
	}
	return d.settle(ctx, a, cfg, o.ID)
}

// SetNameservers puts name_servers.
func (d *driver) SetNameservers(ctx context.Context, domain string, ns []string) (registrar.Domain, error) {
	if _, err := reqcheck.Domain("domain", domain); err != nil {
		return registrar.Domain{}, err
	}
	checked, err := reqcheck.Nameservers("nameservers", ns)
	if err != nil {
		return registrar.Domain{}, err
	}
	return d.update(ctx, domain, map[string]any{"name_servers": nameservers(checked), "remove_nses": true}, "nameservers")
}

// SetLock puts is_locked.
func (d *driver) SetLock(ctx context.Context, domain string, locked bool) (registrar.Domain, error) {
	return d.update(ctx, domain, map[string]any{"is_locked": locked}, "domain")
}

// RemoveDNSSEC puts is_dnssec_enabled false with no dnssec_keys.
func (d *driver) RemoveDNSSEC(ctx context.Context, domain string) (registrar.Domain, error) {
	return d.update(ctx, domain, map[string]any{"is_dnssec_enabled": false, "dnssec_keys": []any{}}, "domain")
}

// Renew posts domains/{id}/renew.
func (d *driver) Renew(ctx context.Context, domain string, years int) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if years, err = reqcheck.Years("years", years); err != nil {
		return registrar.Domain{}, err
	}
	a, cfg, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	o, err := d.mustFind(ctx, a, name)
	if err != nil {
		return registrar.Domain{}, err
	}
	if err := a.do(ctx, "POST", fmt.Sprintf("domains/%d/renew", o.ID), nil, map[string]any{"period": years}, nil, "years"); err != nil {
		return registrar.Domain{}, err
	}
	return d.settle(ctx, a, cfg, o.ID)
}

// snapshotPages bounds a snapshot to 100 pages of 500 domains.
const (
	snapshotPages    = 100
	snapshotPageSize = 500
)

// Snapshot pages through GET domains.
func (d *driver) Snapshot(ctx context.Context) ([]registrar.Domain, error) {
	a, _, err := d.client()
	if err != nil {
		return nil, err
	}
	var out []registrar.Domain
	for page := range snapshotPages {
		var res struct {
			Results []opDomain       `json:"results"`
			Total   wirevalue.Number `json:"total"`
		}
		q := url.Values{"limit": {strconv.Itoa(snapshotPageSize)}, "offset": {strconv.Itoa(page * snapshotPageSize)}}
		if err := a.do(ctx, "GET", "domains", q, nil, &res, "domain"); err != nil {
			return nil, err
		}
		for _, o := range res.Results {
			out = append(out, o.toDomain())
		}
		if len(res.Results) < snapshotPageSize || int64(len(out)) >= int64(res.Total) {
			return out, nil
		}
	}
	return nil, sdk.LimitExceeded("the Openprovider account holds more than %d domains, more than a snapshot reads", snapshotPages*snapshotPageSize)
}

var (
	_ registrar.Registrar     = (*driver)(nil)
	_ registrar.Transferer    = (*driver)(nil)
	_ registrar.Locker        = (*driver)(nil)
	_ registrar.DomainReader  = (*driver)(nil)
	_ registrar.DNSSECRemover = (*driver)(nil)
	_ sdk.Configurer          = (*driver)(nil)
)
