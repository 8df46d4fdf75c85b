package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
	"github.com/fedhost/fedhost/plugins/registrars/internal/wirevalue"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// driver serves the registrar contract on one INWX account.
type driver struct {
	mu  sync.Mutex
	cfg *config
	rpc *domrobot
}

func (d *driver) client() (*domrobot, *config, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rpc == nil {
		return nil, nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first call")
	}
	return d.rpc, d.cfg, nil
}

// domainInfo is domain.info's resData and one entry of domain.list's.
type domainInfo struct {
	Domain       string         `json:"domain"`
	ExDate       wirevalue.Time `json:"exDate"`
	Status       string         `json:"status"`
	TransferLock wirevalue.Flag `json:"transferLock"`
	NS           []string       `json:"ns"`
	AuthCode     string         `json:"authCode"`
}

func (i domainInfo) toDomain() registrar.Domain {
	ns := make([]string, 0, len(i.NS))
	for _, n := range i.NS {
		if len(ns) < 13 {
			ns = append(ns, reqcheck.Text(strings.ToLower(n), 253))
		}
	}
	return registrar.Domain{Name: reqcheck.Text(strings.ToLower(i.Domain), 253), Status: status(i.Status),
		Expires: time.Time(i.ExDate), Locked: bool(i.TransferLock), Nameservers: ns}
}

// pending says a domain.info status is a registry action not yet ended (PENDING CREATE,
// PENDING TRANSFER and the like).
func pending(s string) bool { return strings.Contains(strings.ToUpper(s), "PENDING") }

// status names a domain's state in the contract's words: active, pending, or INWX's own
// status lower-cased.
func status(s string) string {
	switch u := strings.ToUpper(strings.TrimSpace(s)); {
	case pending(u):
		return registrar.StatusPending
	case u == "OK" || u == "ACTIVE":
		return registrar.StatusActive
	}
	return reqcheck.Text(strings.ToLower(s), 64)
}

func (d *driver) info(ctx context.Context, rpc *domrobot, name string) (domainInfo, error) {
	var i domainInfo
	_, err := rpc.call(ctx, "domain.info", map[string]any{"domain": name, "wide": 2}, &i, "domain")
	return i, err
}

// settle reads the domain until the registry has ended what is pending, for at most
// pending_wait_seconds; a domain still pending then is returned with status pending, to
// be followed by the snapshot.
func (d *driver) settle(ctx context.Context, rpc *domrobot, cfg *config, name string) (registrar.Domain, error) {
	deadline := time.Now().Add(cfg.pendingWait)
	for {
		i, err := d.info(ctx, rpc, name)
		if sdk.CodeOf(err) == sdk.CodeNotFound {
			// INWX accepted the order, and the registry ended it without the domain.
			return registrar.Domain{Name: name, Status: registrar.StatusFailed}, nil
		}
		if err != nil {
			return registrar.Domain{}, err
		}
		if !pending(i.Status) || !time.Now().Before(deadline) {
			return i.toDomain(), nil
		}
		select {
		case <-ctx.Done():
			return i.toDomain(), nil
		case <-time.After(min(cfg.poll, time.Until(deadline))):
		}
	}
}

// checked is one domain of domain.check's answer.
type checked struct {
	Domain string           `json:"domain"`
	Avail  wirevalue.Number `json:"avail"`
	Status string           `json:"status"`
	Price  wirevalue.Price  `json:"price"`
}

// Check calls domain.check for the availability and the price of a year, and
// domain.getPrices for the TLD's renewal and transfer prices and the currency.
func (d *driver) Check(ctx context.Context, domain string) (registrar.Availability, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Availability{}, err
	}
	rpc, cfg, err := d.client()
	if err != nil {
		return registrar.Availability{}, err
	}
	var res struct {
		Domain []checked `json:"domain"`
	}
	if _, err := rpc.call(ctx, "domain.check", map[string]any{"domain": name, "wide": 2}, &res, "domain"); err != nil {
		return registrar.Availability{}, err
	}
	i := slices.IndexFunc(res.Domain, func(c checked) bool { return strings.EqualFold(c.Domain, name) })
	if i < 0 {
		return registrar.Availability{}, sdk.Errorf(sdk.CodeInternal, "INWX domain.check answered without the domain asked for")
	}
	c := res.Domain[i]
	a := registrar.Availability{Available: c.Avail == 1, PriceMicros: int64(c.Price), Currency: cfg.currency}
	if !a.Available {
		a.Reason = "INWX says: " + reqcheck.Text(c.Status, 64)
	}
	var prices struct {
		Price []struct {
			TLD           string          `json:"tld"`
			Currency      string          `json:"currency"`
			RenewalPrice  wirevalue.Price `json:"renewalPrice"`
			TransferPrice wirevalue.Price `json:"transferPrice"`
		} `json:"price"`
	}
	tld := name[strings.LastIndexByte(name, '.')+1:]
	if _, err := rpc.call(ctx, "domain.getPrices", map[string]any{"tld": []string{tld}, "vat": false}, &prices, "domain"); err != nil {
		return registrar.Availability{}, err
	}
	for _, p := range prices.Price {
		if strings.EqualFold(p.TLD, tld) {
			a.RenewalPriceMicros, a.TransferPriceMicros = int64(p.RenewalPrice), int64(p.TransferPrice)
			if cur := strings.ToUpper(p.Currency); len(cur) == 3 && strings.Trim(cur, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
				a.Currency = cur
			}
		}
	}
	return a, nil
}

// confirm refuses an order whose confirmed price or currency is not what INWX asks now,
// before anything is charged; a zero price confirms nothing.
func confirm(confirmed int64, currency string, asked int64, askedCurrency string) error {
	if currency != "" && currency != askedCurrency {
		return sdk.Invalid("currency", "INWX quotes in %s, not in the currency confirmed: check the domain again and confirm its price", askedCurrency)
	}
	if confirmed != 0 && confirmed != asked {
		return sdk.Invalid("price_micros", "INWX asks %s %s a year now, not the price confirmed: check the domain again and confirm the new price",
			reqcheck.FormatMicros(asked), askedCurrency)
	}
	return nil
}

// held answers a domain the account holds already, as it is: how a repeated Register
// or Transfer of one confirmation charges nothing again (DomRobot takes no idempotency
// key). ok is false when the account does not hold it.
func (d *driver) held(ctx context.Context, rpc *domrobot, name string) (registrar.Domain, bool, error) {
	i, err := d.info(ctx, rpc, name)
	switch {
	case err == nil:
		return i.toDomain(), true, nil
	case sdk.CodeOf(err) == sdk.CodeNotFound:
		return registrar.Domain{}, false, nil
	}
	return registrar.Domain{}, false, err
}

// Domain reads one domain with domain.info.
func (d *driver) Domain(ctx context.Context, domain string) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	rpc, _, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	i, err := d.info(ctx, rpc, name)
	if err != nil {
		return registrar.Domain{}, err
	}
	out := []registrar.Domain{i.toDomain()}
	if err := d.withDNSSEC(ctx, rpc, out); err != nil {
		return registrar.Domain{}, err
	}
	return out[0], nil
}

// contactID reads a contact id of the contract as INWX's numeric handle.
func contactID(field, id string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return 0, sdk.Invalid(field, "give the id of an INWX contact (a positive number, as PutContact returns)")
	}
	return n, nil
}

// contactParams sets the contact handles of domain.create; the owner stands in for a
// contact not given.
func contactParams(params map[string]any, req registrar.RegisterRequest) error {
	owner, err := contactID("owner_contact", req.OwnerContact)
	if err != nil {
		return err
	}
	params["registrant"] = owner
	for _, c := range []struct{ field, param, id string }{
		{"admin_contact", "admin", req.AdminContact}, {"tech_contact", "tech", req.TechContact}, {"billing_contact", "billing", req.BillingContact},
	} {
		params[c.param] = owner
		if c.id != "" {
			if params[c.param], err = contactID(c.field, c.id); err != nil {
				return err
			}
		}
	}
	return nil
}

// Register checks the domain (available, at the price confirmed), calls domain.create
// with the contact handles, then follows the registry until the domain exists.
func (d *driver) Register(ctx context.Context, req registrar.RegisterRequest) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", req.Domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	years, err := reqcheck.Years("years", req.Years)
	if err != nil {
		return registrar.Domain{}, err
	}
	params := map[string]any{"domain": name, "period": fmt.Sprintf("%dY", years)}
	if len(req.Nameservers) > 0 {
		if params["ns"], err = reqcheck.Nameservers("nameservers", req.Nameservers); err != nil {
			return registrar.Domain{}, err
		}
	}
	rpc, cfg, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	if dom, ok, err := d.held(ctx, rpc, name); err != nil || ok {
		return dom, err
	}
	a, err := d.Check(ctx, name)
	if err != nil {
		return registrar.Domain{}, err
	}
	if !a.Available {
		return registrar.Domain{}, sdk.Invalid("domain", "INWX cannot register this domain (%s): choose another", a.Reason)
	}
	if err := confirm(req.PriceMicros, req.Currency, a.PriceMicros, a.Currency); err != nil {
		return registrar.Domain{}, err
	}
	if err := contactParams(params, req); err != nil {
		return registrar.Domain{}, err
	}
	if _, err := rpc.call(ctx, "domain.create", params, nil, "domain"); err != nil {
		return registrar.Domain{}, err
	}
	return d.settle(ctx, rpc, cfg, name)
}

// Renew calls domain.renew with the current expiry, which INWX requires so that a
// repeated call cannot renew twice.
func (d *driver) Renew(ctx context.Context, domain string, years int) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if years, err = reqcheck.Years("years", years); err != nil {
		return registrar.Domain{}, err
	}
	rpc, cfg, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	i, err := d.info(ctx, rpc, name)
	if err != nil {
		return registrar.Domain{}, err
	}
	if time.Time(i.ExDate).IsZero() {
		return registrar.Domain{}, sdk.Errorf(sdk.CodeInternal, "INWX domain.info gave no expiry for the domain to renew")
	}
	params := map[string]any{"domain": name, "period": fmt.Sprintf("%dY", years), "expiration": time.Time(i.ExDate).Format("2006-01-02")}
	if _, err := rpc.call(ctx, "domain.renew", params, nil, "domain"); err != nil {
		return registrar.Domain{}, err
	}
	return d.settle(ctx, rpc, cfg, name)
}

func (d *driver) update(ctx context.Context, name string, params map[string]any, field string) (registrar.Domain, error) {
	rpc, cfg, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	params["domain"] = name
	if _, err := rpc.call(ctx, "domain.update", params, nil, field); err != nil {
		return registrar.Domain{}, err
	}
	return d.settle(ctx, rpc, cfg, name)
}

// SetNameservers calls domain.update with ns.
func (d *driver) SetNameservers(ctx context.Context, domain string, nameservers []string) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	ns, err := reqcheck.Nameservers("nameservers", nameservers)
	if err != nil {
		return registrar.Domain{}, err
	}
	return d.update(ctx, name, map[string]any{"ns": ns}, "nameservers")
}

// SetLock calls domain.update with transferLock 1 or 0.
func (d *driver) SetLock(ctx context.Context, domain string, locked bool) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	lock := 0
	if locked {
		lock = 1
	}
	return d.update(ctx, name, map[string]any{"transferLock": lock}, "domain")
}

// Transfer calls domain.transfer with the auth code and follows the transfer until the
// registry ends it or pending_wait_seconds pass.
func (d *driver) Transfer(ctx context.Context, req registrar.TransferRequest) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", req.Domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if req.AuthCode == "" || len(req.AuthCode) > 255 || strings.ContainsFunc(req.AuthCode, func(r rune) bool { return r < ' ' }) {
		return registrar.Domain{}, sdk.Invalid("auth_code", "give the auth code the losing registrar handed out (1 to 255 printable characters)")
	}
	params := map[string]any{"domain": name, "authCode": req.AuthCode}
	if req.OwnerContact != "" {
		if params["registrant"], err = contactID("owner_contact", req.OwnerContact); err != nil {
			return registrar.Domain{}, err
		}
	}
	rpc, cfg, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	if dom, ok, err := d.held(ctx, rpc, name); err != nil || ok {
		return dom, err
	}
	if req.PriceMicros != 0 || req.Currency != "" {
		a, err := d.Check(ctx, name)
		if err != nil {
			return registrar.Domain{}, err
		}
		if err := confirm(req.PriceMicros, req.Currency, a.TransferPriceMicros, a.Currency); err != nil {
			return registrar.Domain{}, err
		}
	}
	if _, err := rpc.call(ctx, "domain.transfer", params, nil, "auth_code"); err != nil {
		return registrar.Domain{}, err
	}
	return d.settle(ctx, rpc, cfg, name)
}

// AuthCode reads the auth code from domain.info.
func (d *driver) AuthCode(ctx context.Context, domain string) (string, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return "", err
	}
	rpc, _, err := d.client()
	if err != nil {
		return "", err
	}
	i, err := d.info(ctx, rpc, name)
	if err != nil {
		return "", err
	}
	if i.AuthCode == "" || len(i.AuthCode) > 255 {
		return "", sdk.NotFound("INWX domain.info gives no auth code for this domain: unlock it first")
	}
	return i.AuthCode, nil
}

// snapshotPages bounds a snapshot to 100 pages of 250 domains.
const (
	snapshotPages    = 100
	snapshotPageSize = 250
)

// Snapshot pages through domain.list.
func (d *driver) Snapshot(ctx context.Context) ([]registrar.Domain, error) {
	rpc, _, err := d.client()
	if err != nil {
		return nil, err
	}
	var out []registrar.Domain
	for page := 1; page <= snapshotPages; page++ {
		var res struct {
			Count  wirevalue.Number `json:"count"`
			Domain []domainInfo     `json:"domain"`
		}
		if _, err := rpc.call(ctx, "domain.list", map[string]any{"page": page, "pagelimit": snapshotPageSize, "wide": 2}, &res, "domain"); err != nil {
			return nil, err
		}
		batch := make([]registrar.Domain, len(res.Domain))
		for i, info := range res.Domain {
			batch[i] = info.toDomain()
		}
		if err := d.withDNSSEC(ctx, rpc, batch); err != nil {
			return nil, err
		}
		out = append(out, batch...)
		if len(res.Domain) < snapshotPageSize || int64(len(out)) >= int64(res.Count) {
			return out, nil
		}
	}
	return nil, sdk.LimitExceeded("the INWX account holds more than %d domains, more than a snapshot reads", snapshotPages*snapshotPageSize)
}

var (
	_ registrar.Registrar    = (*driver)(nil)
	_ registrar.Transferer   = (*driver)(nil)
	_ registrar.Locker       = (*driver)(nil)
	_ registrar.DomainReader = (*driver)(nil)
	_ sdk.Configurer         = (*driver)(nil)
)
