package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// currency is the one Porkbun prices in.
const currency = "USD"

// driver is the Porkbun registrar driver. Porkbun registers with the account's own
// contact and its API has no calls for contacts, the transfer lock, auth codes or
// DNSSEC removal of a domain, so the driver offers Registrar, DomainReader and Transfer.
type driver struct {
	mu  sync.Mutex
	api *api
}

func (d *driver) client() (*api, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.api == nil {
		return nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first call")
	}
	return d.api, nil
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkDomain returns the domain in lower case, or an error naming field. It never
// echoes the value.
func checkDomain(field, name string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
	if n == "" {
		return "", sdk.Invalid(field, "give a domain name (example.com)")
	}
	labels := strings.Split(n, ".")
	if len(n) > 253 || len(labels) < 2 {
		return "", sdk.Invalid(field, "not a domain name of at least two labels (example.com)")
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return "", sdk.Invalid(field, "not a domain name: labels are letters, digits and inner hyphens, 1 to 63 (IDNs in their xn-- form)")
		}
	}
	return n, nil
}

// path is an endpoint with the domain as its last segment.
func path(endpoint, domain string) string { return "/" + endpoint + "/" + url.PathEscape(domain) }

type checkAnswer struct {
	Response struct {
		Avail      string `json:"avail"`
		Type       string `json:"type"`
		Price      string `json:"price"`
		Premium    string `json:"premium"`
		Additional struct {
			Renewal  struct{ Price string } `json:"renewal"`
			Transfer struct{ Price string } `json:"transfer"`
		} `json:"additional"`
	} `json:"response"`
}

func (d *driver) check(ctx context.Context, a *api, domain string) (registrar.Availability, error) {
	var ans checkAnswer
	if err := a.call(ctx, path("domain/checkDomain", domain), nil, "", true, &ans); err != nil {
		return registrar.Availability{}, domainError(err, "domain")
	}
	r := ans.Response
	av := registrar.Availability{Currency: currency}
	var err error
	if av.PriceMicros, err = priceMicros(r.Price); err != nil {
		return registrar.Availability{}, fmt.Errorf("checkDomain: price: %w", err)
	}
	// Missing prices are unknown (0), as the contract allows.
	av.RenewalPriceMicros, _ = priceMicros(r.Additional.Renewal.Price)
	av.TransferPriceMicros, _ = priceMicros(r.Additional.Transfer.Price)
	switch {
	case r.Avail != "yes":
		av.Reason = "the domain is registered already"
	case r.Premium == "yes":
		av.Reason = "a premium domain: Porkbun registers premium domains on its website only"
	default:
		av.Available = true
	}
	return av, nil
}

// Check asks checkDomain for availability and the prices.
func (d *driver) Check(ctx context.Context, name string) (registrar.Availability, error) {
	a, err := d.client()
	if err != nil {
		return registrar.Availability{}, err
	}
	domain, err := checkDomain("domain", name)
	if err != nil {
		return registrar.Availability{}, err
	}
	return d.check(ctx, a, domain)
}

// confirmPrice compares a confirmed price with the one Porkbun asks now and returns the
// cost in cents to send.
func confirmPrice(confirmed int64, cur string, now int64, what string) (int64, error) {
	if cur != "" && cur != currency {
		return 0, sdk.Invalid("currency", "Porkbun prices in %s: check again and confirm the price it quotes", currency)
	}
	if now <= 0 {
		return 0, sdk.Unavailable("Porkbun quoted no %s price for the domain: try again later", what)
	}
	if confirmed != 0 && confirmed != now {
		return 0, sdk.Invalid("price_micros", "the %s price changed since it was confirmed (now %s %s): check again and confirm the new price; nothing was charged",
			what, formatMicros(now), currency)
	}
	if now%10_000 != 0 {
		return 0, fmt.Errorf("Porkbun's %s price is not a whole number of cents", what)
	}
	return now / 10_000, nil
}

// Register checks the price, then calls domain/create with the cost in cents and
// agreeToTerms. A domain the account already holds is answered as it is, so that a
// retried confirmation never charges twice; the idempotency key goes to Porkbun as
// its Idempotency-Key header, which covers a retry whose first call got no answer.
func (d *driver) Register(ctx context.Context, req registrar.RegisterRequest) (registrar.Domain, error) {
	a, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	domain, err := checkDomain("domain", req.Domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if req.Years != 0 && req.Years != 1 {
		return registrar.Domain{}, sdk.Invalid("years", "Porkbun's API registers for one year: register for 1 and renew for more")
	}
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return registrar.Domain{}, err
	}
	if len(req.Nameservers) > 0 {
		if _, err := checkNameservers(req.Nameservers); err != nil {
			return registrar.Domain{}, err
		}
	}
	if held, ok, err := d.lookup(ctx, a, domain); err != nil {
		return registrar.Domain{}, err
	} else if ok {
		return held, nil
	}
	av, err := d.check(ctx, a, domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if !av.Available {
		return registrar.Domain{}, sdk.Invalid("domain", "Porkbun cannot register it: %s", av.Reason)
	}
	cents, err := confirmPrice(req.PriceMicros, req.Currency, av.PriceMicros, "registration")
	if err != nil {
		return registrar.Domain{}, err
	}
	body := map[string]any{"cost": cents, "agreeToTerms": "yes"}
	if err := a.call(ctx, path("domain/create", domain), body, req.IdempotencyKey, req.IdempotencyKey != "", nil); err != nil {
		return registrar.Domain{}, domainError(err, "domain")
	}
	if len(req.Nameservers) > 0 {
		if _, err := d.SetNameservers(ctx, domain, req.Nameservers); err != nil {
			return registrar.Domain{}, err
		}
	}
	dom, ok, err := d.lookup(ctx, a, domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if !ok {
		// Registered, but not listed yet: the registry has not finished.
		return registrar.Domain{Name: domain, Status: registrar.StatusPending}, nil
	}
	return dom, nil
}

// Renew calls domain/renew with the renewal price checkDomain quotes now.
func (d *driver) Renew(ctx context.Context, name string, years int) (registrar.Domain, error) {
	a, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	domain, err := checkDomain("domain", name)
	if err != nil {
		return registrar.Domain{}, err
	}
	if years != 0 && years != 1 {
		return registrar.Domain{}, sdk.Invalid("years", "Porkbun's API renews for one year at a time")
	}
	if _, ok, err := d.lookup(ctx, a, domain); err != nil {
		return registrar.Domain{}, err
	} else if !ok {
		return registrar.Domain{}, sdk.NotFound("the Porkbun account does not hold the domain (or API access is off for it)")
	}
	av, err := d.check(ctx, a, domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	cents, err := confirmPrice(0, "", av.RenewalPriceMicros, "renewal")
	if err != nil {
		return registrar.Domain{}, err
	}
	if err := a.call(ctx, path("domain/renew", domain), map[string]any{"cost": cents}, "", false, nil); err != nil {
		return registrar.Domain{}, domainError(err, "domain")
	}
	return d.Domain(ctx, domain)
}

// checkNameservers returns the host names in lower case without the trailing dot.
func checkNameservers(ns []string) ([]string, error) {
	if len(ns) < 2 || len(ns) > 13 {
		return nil, sdk.Invalid("nameservers", "give from 2 to 13 nameservers")
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		h, err := checkDomain(fmt.Sprintf("nameservers/%d", i), n)
		if err != nil {
			return nil, sdk.Invalid(fmt.Sprintf("nameservers/%d", i), "not a host name (ns1.example.net)")
		}
		out[i] = h
	}
	return out, nil
}

// SetNameservers calls domain/updateNs and reads them back with domain/getNs.
func (d *driver) SetNameservers(ctx context.Context, name string, nameservers []string) (registrar.Domain, error) {
	a, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	domain, err := checkDomain("domain", name)
	if err != nil {
		return registrar.Domain{}, err
	}
	ns, err := checkNameservers(nameservers)
	if err != nil {
		return registrar.Domain{}, err
	}
	if err := a.call(ctx, path("domain/updateNs", domain), map[string]any{"ns": ns}, "", true, nil); err != nil {
		return registrar.Domain{}, domainError(err, "domain")
	}
	return d.Domain(ctx, domain)
}

type listAnswer struct {
	Domains []struct {
		Domain       string `json:"domain"`
		Status       string `json:"status"`
		ExpireDate   string `json:"expireDate"`
		SecurityLock any    `json:"securityLock"`
	} `json:"domains"`
}

// pageSize is listAll's page: a shorter page is the last.
const pageSize = 1000

// maxDomains bounds a snapshot.
const maxDomains = 100_000

// Snapshot pages through domain/listAll.
func (d *driver) Snapshot(ctx context.Context) ([]registrar.Domain, error) {
	a, err := d.client()
	if err != nil {
		return nil, err
	}
	return d.list(ctx, a)
}

func (d *driver) list(ctx context.Context, a *api) ([]registrar.Domain, error) {
	var out []registrar.Domain
	for start := 0; start < maxDomains; start += pageSize {
		var ans listAnswer
		if err := a.call(ctx, "/domain/listAll", map[string]any{"start": strconv.Itoa(start)}, "", true, &ans); err != nil {
			return nil, err
		}
		for _, e := range ans.Domains {
			name, err := checkDomain("domain", e.Domain)
			if err != nil {
				continue // not a name the host could use; Porkbun's, not the operator's
			}
			dom := registrar.Domain{Name: name, Status: domainStatus(e.Status), Locked: yes(e.SecurityLock)}
			if t, err := time.Parse(dateLayout, e.ExpireDate); err == nil {
				dom.Expires = t.UTC()
			}
			out = append(out, dom)
		}
		if len(ans.Domains) < pageSize {
			break
		}
	}
	return out, nil
}

// dateLayout is how Porkbun writes dates ("2026-08-20 17:52:51").
const dateLayout = "2006-01-02 15:04:05"

// domainStatus maps listAll's status: ACTIVE, words with PENDING, and others as they
// are, in lower case.
func domainStatus(s string) string {
	u := strings.ToUpper(s)
	switch {
	case u == "ACTIVE":
		return registrar.StatusActive
	case strings.Contains(u, "PENDING"):
		return registrar.StatusPending
	}
	return bounded(strings.ToLower(s), 32)
}

// yes reads Porkbun's booleans: "1", 1, "yes", true.
func yes(v any) bool {
	switch x := v.(type) {
	case string:
		return x == "1" || strings.EqualFold(x, "yes") || x == "true"
	case float64:
		return x == 1
	case bool:
		return x
	}
	return false
}

// lookup finds domain in the account.
func (d *driver) lookup(ctx context.Context, a *api, domain string) (registrar.Domain, bool, error) {
	all, err := d.list(ctx, a)
	if err != nil {
		return registrar.Domain{}, false, err
	}
	for _, dom := range all {
		if dom.Name == domain {
			return dom, true, nil
		}
	}
	return registrar.Domain{}, false, nil
}

type nsAnswer struct {
	NS []string `json:"ns"`
}

type transferAnswer struct {
	Transfer struct {
		Domain string `json:"domain"`
		Status string `json:"status"`
	} `json:"transfer"`
}

// Domain reads one domain: from listAll with its nameservers from getNs, or, for one
// not in the account yet, its inbound transfer from getTransfer.
func (d *driver) Domain(ctx context.Context, name string) (registrar.Domain, error) {
	a, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	domain, err := checkDomain("domain", name)
	if err != nil {
		return registrar.Domain{}, err
	}
	dom, ok, err := d.lookup(ctx, a, domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	if ok {
		if dom.Status == registrar.StatusPending {
			return dom, nil
		}
		var ns nsAnswer
		if err := a.call(ctx, path("domain/getNs", domain), nil, "", true, &ns); err != nil {
			return registrar.Domain{}, domainError(err, "domain")
		}
		for i, n := range ns.NS {
			if i == 13 {
				break
			}
			dom.Nameservers = append(dom.Nameservers, bounded(strings.TrimSuffix(strings.ToLower(n), "."), 253))
		}
		return dom, nil
	}
	var tr transferAnswer
	if err := a.call(ctx, path("domain/getTransfer", domain), nil, "", true, &tr); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && !isAuthError(ae) && ae.HTTPStatus < 500 {
			return registrar.Domain{}, sdk.NotFound("the Porkbun account neither holds the domain nor transfers it in")
		}
		return registrar.Domain{}, err
	}
	return registrar.Domain{Name: domain, Status: transferStatus(tr.Transfer.Status)}, nil
}

// transferStatus maps getTransfer's status. DONE without the domain in listAll yet is
// still pending.
func transferStatus(s string) string {
	switch strings.ToUpper(s) {
	case "CANCELED", "CANCELLED", "REJECTED", "FAILED", "EXPIRED":
		return registrar.StatusFailed
	}
	return registrar.StatusPending
}

// Transfer checks the auth code and the transfer price, then calls domain/transfer.
func (d *driver) Transfer(ctx context.Context, req registrar.TransferRequest) (registrar.Domain, error) {
	a, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	domain, err := checkDomain("domain", req.Domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	code := strings.TrimSpace(req.AuthCode)
	if code == "" || len(code) > 255 {
		return registrar.Domain{}, sdk.Invalid("auth_code", "give the auth (EPP) code the current registrar hands out, at most 255 characters")
	}
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return registrar.Domain{}, err
	}
	if held, ok, err := d.lookup(ctx, a, domain); err != nil {
		return registrar.Domain{}, err
	} else if ok {
		return held, nil
	}
	av, err := d.check(ctx, a, domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	cents, err := confirmPrice(req.PriceMicros, req.Currency, av.TransferPriceMicros, "transfer")
	if err != nil {
		return registrar.Domain{}, err
	}
	body := map[string]any{"cost": cents, "authCode": code}
	if err := a.call(ctx, path("domain/transfer", domain), body, req.IdempotencyKey, req.IdempotencyKey != "", nil); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && strings.Contains(strings.ToUpper(ae.Code+" "+ae.Message), "AUTH") && !isAuthError(ae) {
			return registrar.Domain{}, sdk.Invalid("auth_code", "Porkbun refused the auth code: ask the current registrar for it again")
		}
		return registrar.Domain{}, domainError(err, "domain")
	}
	return d.Domain(ctx, domain)
}

// AuthCode is not in Porkbun's API: the account's web pages show it.
func (d *driver) AuthCode(context.Context, string) (string, error) {
	return "", sdk.Errorf(sdk.CodeUnsupported, "Porkbun's API hands out no auth codes: the operator reads it on Porkbun's domain management page")
}

func checkIdempotencyKey(k string) error {
	if len(k) > 255 || strings.ContainsAny(k, "\r\n") {
		return sdk.Invalid("idempotency_key", "at most 255 characters on one line")
	}
	return nil
}

// domainError turns an ERROR of a domain call that is not about the server or the keys
// into a refusal naming field: Porkbun's message says what it refused.
func domainError(err error, field string) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return sdk.Invalid(field, "Porkbun refused it: %s", ae.Message)
	}
	return err
}

// priceMicros reads a USD price as Porkbun writes it ("9.68") into millionths, exactly.
func priceMicros(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty")
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(whole) == 0 || len(whole) > 9 || len(frac) > 6 {
		return 0, errors.New("not a price of at most 9 digits and 6 decimals")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 {
		return 0, errors.New("not a price")
	}
	var f int64
	if frac != "" {
		f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil || f < 0 || strings.ContainsAny(frac, "+-") {
			return 0, errors.New("not a price")
		}
	}
	if strings.ContainsAny(whole, "+-") {
		return 0, errors.New("not a price")
	}
	return w*1_000_000 + f, nil
}

// formatMicros writes millionths as a price with two or more decimals (9.68).
func formatMicros(m int64) string {
	s := fmt.Sprintf("%d.%06d", m/1_000_000, m%1_000_000)
	for strings.HasSuffix(s, "0") && len(s)-strings.Index(s, ".") > 3 {
		s = s[:len(s)-1]
	}
	return s
}

var (
	_ registrar.Registrar    = (*driver)(nil)
	_ registrar.DomainReader = (*driver)(nil)
	_ registrar.Transferer   = (*driver)(nil)
	_ sdk.Configurer         = (*driver)(nil)
)
