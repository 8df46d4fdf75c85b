// Package optest is an HTTP server that answers as Openprovider's REST API v1beta does,
// for the openprovider driver's tests: a bearer token from auth/login required on every
// other call, the {code, desc, data} envelope with HTTP 4xx for refusals, domains
// requested and then active, and a rate limit answered 429. It keeps its domains and
// customers in memory.
package optest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Domain is a domain of the test account.
type Domain struct {
	ID          int
	Name        string
	Expires     time.Time
	Locked      bool
	Nameservers []string
	AuthCode    string
	Owner       string
	DNSKeys     int
	pendingLeft int
}

// Server is a running API.
type Server struct {
	*httptest.Server
	user, pass string

	mu         sync.Mutex
	tokens     map[string]bool
	domains    map[string]*Domain
	customers  map[string]map[string]any
	nextID     int
	taken      map[string]bool
	foreign    map[string]string
	prices     map[string]string
	pendingFor map[string]int
	premium    map[string]bool
	calls      []string
	failNext   int
	failStatus int
	delay      time.Duration
	rateMax    int
	rateWindow time.Duration
	rateStart  time.Time
	rateCount  int
}

// Start runs the API on loopback for user and pass; stop it with Close.
func Start(user, pass string) *Server {
	s := &Server{user: user, pass: pass, tokens: map[string]bool{}, domains: map[string]*Domain{},
		customers: map[string]map[string]any{}, nextID: 100, taken: map[string]bool{}, foreign: map[string]string{},
		prices: map[string]string{"test": "8.49", "example": "11.00"}, pendingFor: map[string]int{}, premium: map[string]bool{}}
	mux := http.NewServeMux()
	for pattern, h := range map[string]func(*http.Request) (int, int, any){
		"POST /v1beta/domains/check":        s.check,
		"GET /v1beta/domains/prices":        s.price,
		"POST /v1beta/domains":              s.create,
		"POST /v1beta/domains/transfer":     s.transfer,
		"GET /v1beta/domains":               s.list,
		"GET /v1beta/domains/{id}":          s.get,
		"PUT /v1beta/domains/{id}":          s.update,
		"GET /v1beta/domains/{id}/authcode": s.authcode,
		"POST /v1beta/domains/{id}/renew":   s.renew,
		"POST /v1beta/customers":            s.putCustomer,
		"GET /v1beta/customers":             s.listCustomers,
		"GET /v1beta/customers/{handle}":    s.getCustomer,
		"PUT /v1beta/customers/{handle}":    s.putCustomer,
		"DELETE /v1beta/customers/{handle}": s.deleteCustomer,
	} {
		mux.HandleFunc(pattern, s.authed(pattern, h))
	}
	mux.HandleFunc("POST /v1beta/auth/login", s.guard("POST /v1beta/auth/login", s.login))
	s.Server = httptest.NewServer(mux)
	return s
}

// URL is the v1beta root, as the base_url setting takes it.
func (s *Server) URL() string { return s.Server.URL + "/v1beta/" }

// Count says how often a route ("POST /v1beta/domains") was called.
func (s *Server) Count(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c == route {
			n++
		}
	}
	return n
}

// FailNext makes the next n requests answer HTTP status.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failStatus = n, status
}

// Delay holds every answer back by d.
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// RateLimit answers 429 with Retry-After: 1 to requests past max in each window.
func (s *Server) RateLimit(max int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateMax, s.rateWindow, s.rateStart, s.rateCount = max, window, time.Now(), 0
}

// ExpireTokens makes every token handed out so far expired.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]bool{}
}

// Pending keeps a registration or transfer of name requested (REQ) for the next polls
// reads of it (GET domains/{id}, or GET domains with its full_name).
func (s *Server) Pending(name string, polls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingFor[name] = polls
}

// Take marks name as registered by someone else.
func (s *Server) Take(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken[name] = true
}

// AddForeign puts name at another registrar, to be transferred in with authCode.
func (s *Server) AddForeign(name, authCode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foreign[name] = authCode
}

// AddDomain puts name in the account, expiring at expires.
func (s *Server) AddDomain(name string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.domains[name] = &Domain{ID: s.nextID, Name: name, Expires: expires.UTC().Truncate(time.Second), AuthCode: token()}
}

// Premium marks name as a premium domain, free but priced apart.
func (s *Server) Premium(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.premium[name] = true
}

// Sign gives name, a domain of the account, keys DNSSEC keys.
func (s *Server) Sign(name string, keys int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.domains[name].DNSKeys = keys
}

// SetPrice changes the yearly price of an extension ("8.49").
func (s *Server) SetPrice(ext, price string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prices[ext] = price
}

// Domain returns a copy of a domain of the account.
func (s *Server) Domain(name string) (Domain, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.domains[name]
	if !ok {
		return Domain{}, false
	}
	return *d, true
}

// String names the server in test logs.
func (s *Server) String() string { return fmt.Sprintf("Openprovider test server at %s", s.URL()) }

// The API's codes this server answers: 0 success, and one per kind of refusal.
const (
	codeAuth     = 196
	codeInvalid  = 399
	codeNotFound = 320
	codeExists   = 346
	codeAuthCode = 361
)

func reply(w http.ResponseWriter, status, code int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	env := map[string]any{"code": code, "desc": ""}
	if code != 0 {
		env["desc"], _ = data.(string)
		env["data"] = map[string]any{}
	} else {
		env["data"] = data
	}
	_ = json.NewEncoder(w).Encode(env)
}

// guard counts a call and applies the failure, delay and rate limit knobs; it holds the
// lock while h runs.
func (s *Server) guard(route string, h func(http.ResponseWriter, *http.Request) (int, int, any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls = append(s.calls, route)
		delay := s.delay
		if s.failNext > 0 {
			s.failNext--
			status := s.failStatus
			s.mu.Unlock()
			http.Error(w, "<html>upstream error</html>", status)
			return
		}
		if s.rateMax > 0 {
			if time.Since(s.rateStart) > s.rateWindow {
				s.rateStart, s.rateCount = time.Now(), 0
			}
			s.rateCount++
			if s.rateCount > s.rateMax {
				s.mu.Unlock()
				w.Header().Set("Retry-After", "1")
				reply(w, http.StatusTooManyRequests, 429, "Too many requests")
				return
			}
		}
		status, code, data := h(w, r)
		s.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
		}
		reply(w, status, code, data)
	}
}

func (s *Server) authed(route string, h func(*http.Request) (int, int, any)) http.HandlerFunc {
	return s.guard(route, func(_ http.ResponseWriter, r *http.Request) (int, int, any) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !s.tokens[tok] {
			return http.StatusUnauthorized, codeAuth, "Authentication/Authorization Failed"
		}
		return h(r)
	})
}

func (s *Server) login(_ http.ResponseWriter, r *http.Request) (int, int, any) {
	var in struct {
		Username, Password string
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil || in.Username != s.user || in.Password != s.pass {
		return http.StatusUnauthorized, codeAuth, "Authentication/Authorization Failed"
	}
	t := token()
	s.tokens[t] = true
	return http.StatusOK, 0, map[string]any{"token": t, "reseller_id": 1}
}

func token() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	label    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	hostName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
)

type domainName struct {
	Name      string `json:"name"`
	Extension string `json:"extension"`
}

func (n domainName) full() string { return n.Name + "." + n.Extension }

func bad(desc string) (int, int, any) { return http.StatusBadRequest, codeInvalid, desc }

func (s *Server) check(r *http.Request) (int, int, any) {
	var in struct {
		Domains   []domainName `json:"domains"`
		WithPrice bool         `json:"with_price"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil || len(in.Domains) == 0 {
		return bad("domains missing")
	}
	out := []any{}
	for _, n := range in.Domains {
		if !label.MatchString(n.Name) {
			return bad("invalid domain name")
		}
		entry := map[string]any{"domain": n.full(), "status": "free", "is_premium": s.premium[n.full()]}
		price, known := s.prices[n.Extension]
		switch {
		case !known:
			entry["status"], entry["reason"] = "unavailable", "extension not offered"
		case s.taken[n.full()] || s.domains[n.full()] != nil || s.foreign[n.full()] != "":
			entry["status"] = "active"
		}
		if known && in.WithPrice {
			entry["price"] = map[string]any{"product": map[string]any{"price": json.Number(price), "currency": "USD"},
				"reseller": map[string]any{"price": json.Number(price), "currency": "EUR"}}
		}
		out = append(out, entry)
	}
	return http.StatusOK, 0, map[string]any{"results": out}
}

// transferPrice is what a transfer in costs in every extension.
const transferPrice = "5.25"

func (s *Server) price(r *http.Request) (int, int, any) {
	q := r.URL.Query()
	price, known := s.prices[q.Get("domain.extension")]
	if !known || !label.MatchString(q.Get("domain.name")) {
		return bad("no price for this domain")
	}
	switch q.Get("operation") {
	case "create", "renew":
	case "transfer":
		price = transferPrice
	default:
		return bad("operation is create, renew or transfer")
	}
	return http.StatusOK, 0, map[string]any{"is_premium": false, "price": map[string]any{
		"product": map[string]any{"price": json.Number(price), "currency": "USD"}, "reseller": map[string]any{"price": json.Number(price), "currency": "EUR"}}}
}

type order struct {
	Domain        domainName `json:"domain"`
	Period        int        `json:"period"`
	OwnerHandle   string     `json:"owner_handle"`
	AdminHandle   string     `json:"admin_handle"`
	TechHandle    string     `json:"tech_handle"`
	BillingHandle string     `json:"billing_handle"`
	AuthCode      string     `json:"auth_code"`
	NameServers   []struct {
		Name string `json:"name"`
	} `json:"name_servers"`
}

func (s *Server) readOrder(r *http.Request, transfer bool) (order, []string, *[3]any) {
	var o order
	fail := func(status, code int, desc string) (order, []string, *[3]any) {
		return o, nil, &[3]any{status, code, desc}
	}
	if json.NewDecoder(r.Body).Decode(&o) != nil {
		return fail(http.StatusBadRequest, codeInvalid, "the body is not JSON")
	}
	if !label.MatchString(o.Domain.Name) {
		return fail(http.StatusBadRequest, codeInvalid, "invalid domain name")
	}
	if _, known := s.prices[o.Domain.Extension]; !known {
		return fail(http.StatusBadRequest, codeInvalid, "extension not offered")
	}
	if o.Period < 1 || o.Period > 10 {
		return fail(http.StatusBadRequest, codeInvalid, "period out of range")
	}
	handles := []string{o.OwnerHandle}
	if !transfer {
		handles = append(handles, o.AdminHandle, o.TechHandle, o.BillingHandle)
	}
	for _, h := range handles {
		if s.customers[h] == nil {
			return fail(http.StatusBadRequest, codeInvalid, "handle unknown")
		}
	}
	var ns []string
	for _, n := range o.NameServers {
		if !hostName.MatchString(n.Name) {
			return fail(http.StatusBadRequest, codeInvalid, "invalid name server")
		}
		ns = append(ns, n.Name)
	}
	return o, ns, nil
}

func (s *Server) create(r *http.Request) (int, int, any) {
	o, ns, f := s.readOrder(r, false)
	if f != nil {
		return f[0].(int), f[1].(int), f[2]
	}
	name := o.Domain.full()
	if s.taken[name] || s.domains[name] != nil || s.foreign[name] != "" {
		return http.StatusConflict, codeExists, "domain exists"
	}
	s.nextID++
	d := &Domain{ID: s.nextID, Name: name, Expires: time.Now().UTC().Truncate(time.Second).AddDate(o.Period, 0, 0),
		Nameservers: ns, AuthCode: token(), Owner: o.OwnerHandle, pendingLeft: s.pendingFor[name]}
	s.domains[name] = d
	return http.StatusOK, 0, map[string]any{"id": d.ID, "status": s.status(d), "expiration_date": d.Expires.Format("2006-01-02 15:04:05")}
}

func (s *Server) transfer(r *http.Request) (int, int, any) {
	o, ns, f := s.readOrder(r, true)
	if f != nil {
		return f[0].(int), f[1].(int), f[2]
	}
	name := o.Domain.full()
	if s.domains[name] != nil {
		return http.StatusConflict, codeExists, "domain is in this account already"
	}
	code, found := s.foreign[name]
	if !found {
		return http.StatusNotFound, codeNotFound, "domain is registered nowhere"
	}
	if o.AuthCode != code {
		return http.StatusBadRequest, codeAuthCode, "invalid auth code"
	}
	delete(s.foreign, name)
	s.nextID++
	d := &Domain{ID: s.nextID, Name: name, Expires: time.Now().UTC().Truncate(time.Second).AddDate(1, 0, 0),
		Nameservers: ns, AuthCode: token(), Owner: o.OwnerHandle, pendingLeft: max(s.pendingFor[name], 1)}
	s.domains[name] = d
	return http.StatusOK, 0, map[string]any{"id": d.ID, "status": s.status(d)}
}

func (s *Server) status(d *Domain) string {
	if d.pendingLeft > 0 {
		return "REQ"
	}
	return "ACT"
}

func (s *Server) domainData(d *Domain) map[string]any {
	label, ext, _ := strings.Cut(d.Name, ".")
	ns := []any{}
	for i, n := range d.Nameservers {
		ns = append(ns, map[string]any{"name": n, "ip": "", "seq_nr": i + 1})
	}
	return map[string]any{"id": d.ID, "domain": map[string]any{"name": label, "extension": ext}, "status": s.status(d),
		"expiration_date": d.Expires.Format("2006-01-02 15:04:05"), "is_locked": d.Locked, "name_servers": ns,
		"is_dnssec_enabled": d.DNSKeys > 0, "dnssec_keys": dnskeys(d.DNSKeys),
		"owner_handle": d.Owner, "autorenew": "off"}
}

func dnskeys(n int) []any {
	out := []any{}
	for i := range n {
		out = append(out, map[string]any{"flags": 257, "protocol": 3, "alg": 13, "pub_key": fmt.Sprintf("key%d", i)})
	}
	return out
}

func (s *Server) byID(r *http.Request) *Domain {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		return nil
	}
	for _, d := range s.domains {
		if d.ID == id {
			return d
		}
	}
	return nil
}

func notFound() (int, int, any) { return http.StatusNotFound, codeNotFound, "not found" }

func (s *Server) list(r *http.Request) (int, int, any) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	offset, _ := strconv.Atoi(q.Get("offset"))
	if limit <= 0 {
		limit = 100
	}
	var names []string
	for n := range s.domains {
		if full := q.Get("full_name"); full == "" || full == n {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := []any{}
	for i := offset; i < len(names) && i < offset+limit; i++ {
		d := s.domains[names[i]]
		if q.Get("full_name") != "" && d.pendingLeft > 0 {
			d.pendingLeft-- // a read of the one domain, as GET domains/{id}
		}
		out = append(out, s.domainData(d))
	}
	return http.StatusOK, 0, map[string]any{"results": out, "total": len(names)}
}

func (s *Server) get(r *http.Request) (int, int, any) {
	d := s.byID(r)
	if d == nil {
		return notFound()
	}
	if d.pendingLeft > 0 {
		d.pendingLeft--
	}
	return http.StatusOK, 0, s.domainData(d)
}

func (s *Server) update(r *http.Request) (int, int, any) {
	d := s.byID(r)
	if d == nil {
		return notFound()
	}
	var in struct {
		NameServers *[]struct {
			Name string `json:"name"`
		} `json:"name_servers"`
		IsLocked      *bool  `json:"is_locked"`
		RemoveNSes    bool   `json:"remove_nses"`
		DNSSECEnabled *bool  `json:"is_dnssec_enabled"`
		DNSSECKeys    *[]any `json:"dnssec_keys"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil {
		return bad("the body is not JSON")
	}
	if in.NameServers != nil {
		var ns []string
		for _, n := range *in.NameServers {
			if !hostName.MatchString(n.Name) {
				return bad("invalid name server")
			}
			ns = append(ns, n.Name)
		}
		if len(ns) == 0 {
			return bad("name_servers empty")
		}
		if !in.RemoveNSes {
			ns = append(append([]string(nil), d.Nameservers...), ns...) // added to the ones there
		}
		d.Nameservers = ns
	}
	if in.DNSSECEnabled != nil && !*in.DNSSECEnabled {
		if in.DNSSECKeys == nil || len(*in.DNSSECKeys) != 0 {
			return bad("disabling DNSSEC takes an empty dnssec_keys")
		}
		d.DNSKeys = 0
	}
	if in.IsLocked != nil {
		d.Locked = *in.IsLocked
	}
	return http.StatusOK, 0, map[string]any{"status": s.status(d)}
}

func (s *Server) authcode(r *http.Request) (int, int, any) {
	d := s.byID(r)
	if d == nil {
		return notFound()
	}
	if t := r.URL.Query().Get("auth_code_type"); t != "" && t != "external" && t != "internal" {
		return bad("auth_code_type is external or internal")
	}
	return http.StatusOK, 0, map[string]any{"auth_code": d.AuthCode, "type": "internal"}
}

func (s *Server) renew(r *http.Request) (int, int, any) {
	d := s.byID(r)
	if d == nil {
		return notFound()
	}
	var in struct {
		Period int `json:"period"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil || in.Period < 1 || in.Period > 10 {
		return bad("period out of range")
	}
	d.Expires = d.Expires.AddDate(in.Period, 0, 0)
	return http.StatusOK, 0, map[string]any{"status": "ACT"}
}

var (
	countryCode = regexp.MustCompile(`^\+[1-9][0-9]{0,2}$`)
	digits      = regexp.MustCompile(`^[0-9]*$`)
	country     = regexp.MustCompile(`^[A-Z]{2}$`)
)

func (s *Server) putCustomer(r *http.Request) (int, int, any) {
	var c map[string]any
	if json.NewDecoder(r.Body).Decode(&c) != nil {
		return bad("the body is not JSON")
	}
	get := func(path ...string) string {
		var v any = c
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		str, _ := v.(string)
		return str
	}
	if get("name", "first_name") == "" || get("name", "last_name") == "" || !strings.Contains(get("email"), "@") ||
		!countryCode.MatchString(get("phone", "country_code")) || !digits.MatchString(get("phone", "area_code")) ||
		get("phone", "subscriber_number") == "" || !digits.MatchString(get("phone", "subscriber_number")) ||
		get("address", "street") == "" || get("address", "city") == "" || !country.MatchString(get("address", "country")) {
		return bad("customer incomplete or malformed")
	}
	if h := r.PathValue("handle"); h != "" {
		if s.customers[h] == nil {
			return notFound()
		}
		c["handle"] = h
		s.customers[h] = c
		return http.StatusOK, 0, map[string]any{"success": true}
	}
	s.nextID++
	h := fmt.Sprintf("FH%06d-DE", s.nextID)
	c["handle"] = h
	s.customers[h] = c
	return http.StatusOK, 0, map[string]any{"handle": h}
}

func (s *Server) getCustomer(r *http.Request) (int, int, any) {
	c := s.customers[r.PathValue("handle")]
	if c == nil {
		return notFound()
	}
	return http.StatusOK, 0, c
}

func (s *Server) listCustomers(r *http.Request) (int, int, any) {
	var hs []string
	for h := range s.customers {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	out := []any{}
	for _, h := range hs {
		out = append(out, s.customers[h])
	}
	return http.StatusOK, 0, map[string]any{"results": out, "total": len(out)}
}

func (s *Server) deleteCustomer(r *http.Request) (int, int, any) {
	h := r.PathValue("handle")
	if s.customers[h] == nil {
		return notFound()
	}
	for _, d := range s.domains {
		if d.Owner == h {
			return http.StatusBadRequest, codeInvalid, "the customer holds a domain"
		}
	}
	delete(s.customers, h)
	return http.StatusOK, 0, map[string]any{"success": true}
}
