// Package inwxtest is an HTTP server that answers as INWX's DomRobot JSON-RPC API does,
// for the inwx driver's tests: session login by cookie, EPP result codes (1000, 1001 and
// the 2xxx errors), pending registrations and transfers, and a rate limit answered 429.
// It keeps its domains and contacts in memory.
package inwxtest

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
	Name         string
	Expires      time.Time
	Locked       bool
	Nameservers  []string
	AuthCode     string
	Registrant   int
	DNSKeys      int
	pendingLeft  int
	pendingState string
}

// Contact is a contact of the test account.
type Contact struct {
	ID                                                  int
	Type, Name, Org, Street, City, PC, CC, Voice, Email string
}

// Server is a running DomRobot.
type Server struct {
	*httptest.Server
	user, pass string

	mu           sync.Mutex
	sessions     map[string]bool
	domains      map[string]*Domain
	contacts     map[int]*Contact
	nextContact  int
	taken        map[string]bool
	foreign      map[string]string // domain at another registrar → its auth code
	prices       map[string]string // TLD → yearly price
	calls        []string
	failNext     int
	failStatus   int
	delay        time.Duration
	pendingPolls int
	pendingFor   map[string]int
	rateMax      int
	rateWindow   time.Duration
	rateStart    time.Time
	rateCount    int
}

// Start runs a DomRobot on loopback that accepts user and pass; stop it with Close.
func Start(user, pass string) *Server {
	s := &Server{user: user, pass: pass, sessions: map[string]bool{}, domains: map[string]*Domain{},
		contacts: map[int]*Contact{}, nextContact: 1000, taken: map[string]bool{}, foreign: map[string]string{}, pendingFor: map[string]int{},
		prices: map[string]string{"test": "9.99", "example": "12.50"}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the JSON-RPC endpoint, as the base_url setting takes it.
func (s *Server) URL() string { return s.Server.URL + "/jsonrpc/" }

// Calls lists the methods called so far, in order.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// Count says how often method was called.
func (s *Server) Count(method string) int {
	n := 0
	for _, c := range s.Calls() {
		if c == method {
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

// PendingPolls makes registrations and transfers answer 1001 and stay pending for the
// next n domain.info calls on them.
func (s *Server) PendingPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingPolls = n
}

// Pending makes the registration or transfer of name alone answer 1001 and stay
// pending for the next polls domain.info calls on it.
func (s *Server) Pending(name string, polls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingFor[name] = polls
}

// AddDomain puts name in the account, expiring at expires.
func (s *Server) AddDomain(name string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.domains[name] = &Domain{Name: name, Expires: expires.UTC().Truncate(time.Second), AuthCode: token()}
}

// Sign gives name, a domain of the account, keys DNSSEC keys.
func (s *Server) Sign(name string, keys int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.domains[name].DNSKeys = keys
}

// SetPrice changes the yearly price of a TLD ("9.99").
func (s *Server) SetPrice(tld, price string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prices[tld] = price
}

// RateLimit answers 429 with Retry-After: 1 to requests past max in each window.
func (s *Server) RateLimit(max int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateMax, s.rateWindow, s.rateStart, s.rateCount = max, window, time.Now(), 0
}

// EndSessions logs every client out, as a session that timed out.
func (s *Server) EndSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = map[string]bool{}
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

// result is one DomRobot answer.
type result struct {
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
	ReasonCode string `json:"reasonCode,omitempty"`
	Reason     string `json:"reason,omitempty"`
	ResData    any    `json:"resData,omitempty"`
}

// eppText is RFC 5730's text for each code the server answers.
var eppText = map[int]string{
	1000: "Command completed successfully", 1001: "Command completed successfully; action pending",
	2000: "Unknown command", 2001: "Command syntax error", 2003: "Required parameter missing",
	2004: "Parameter value range error", 2005: "Parameter value syntax error",
	2200: "Authentication error", 2202: "Invalid authorization information", 2302: "Object exists",
	2303: "Object does not exist", 2304: "Object status prohibits operation",
	2305: "Object association prohibits operation", 2306: "Parameter value policy error",
}

func fail(code int, reason string) result {
	return result{Code: code, Msg: eppText[code], Reason: reason}
}

func ok(data any) result { return result{Code: 1000, Msg: eppText[1000], ResData: data} }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	decodeErr := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req)
	s.mu.Lock()
	delay := s.delay
	s.calls = append(s.calls, req.Method)
	if s.failNext > 0 {
		s.failNext--
		status := s.failStatus
		s.mu.Unlock()
		http.Error(w, "<html>Service Unavailable</html>", status)
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
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
			return
		}
	}
	var res result
	switch {
	case decodeErr != nil:
		res = fail(2001, "the request is not JSON-RPC")
	case req.Method == "account.login":
		res = s.login(w, req.Params)
	case !s.session(r):
		res = fail(2200, "not logged in")
	default:
		res = s.dispatch(req.Method, req.Params)
	}
	s.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

func (s *Server) login(w http.ResponseWriter, p map[string]any) result {
	if str(p, "user") != s.user || str(p, "pass") != s.pass {
		return fail(2200, "wrong user or password")
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	s.sessions[id] = true
	http.SetCookie(w, &http.Cookie{Name: "domrobot", Value: id, Path: "/", HttpOnly: true})
	return ok(map[string]any{"customerId": 1, "accountId": 1, "tfa": "0"})
}

func (s *Server) session(r *http.Request) bool {
	c, err := r.Cookie("domrobot")
	return err == nil && s.sessions[c.Value]
}

func str(p map[string]any, k string) string { v, _ := p[k].(string); return v }

// num reads a number sent as a JSON number or string; -1 when absent or not one.
func num(p map[string]any, k string) int {
	switch v := p[k].(type) {
	case float64:
		return int(v)
	case string:
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return -1
}

var (
	hostName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	eppPhone = regexp.MustCompile(`^\+[0-9]{1,3}\.[0-9]{4,14}$`)
	period   = regexp.MustCompile(`^([1-9]|10)Y$`)
)

func tld(name string) string { return name[strings.LastIndex(name, ".")+1:] }

func (s *Server) dispatch(method string, p map[string]any) result {
	switch method {
	case "domain.check":
		return s.check(p)
	case "domain.create":
		return s.create(p)
	case "domain.info":
		d, ok2 := s.domains[str(p, "domain")]
		if !ok2 {
			return fail(2303, "domain not in this account")
		}
		if d.pendingLeft > 0 {
			d.pendingLeft--
		}
		return ok(s.info(d))
	case "domain.list":
		return s.list(p)
	case "domain.getPrices":
		return s.getPrices(p)
	case "domain.renew":
		return s.renew(p)
	case "domain.update":
		return s.update(p)
	case "domain.transfer":
		return s.transfer(p)
	case "dnssec.info":
		raw, _ := p["domains"].([]any)
		out := []any{}
		for _, n := range raw {
			name, _ := n.(string)
			if d, found := s.domains[name]; found {
				status := "NONE"
				if d.DNSKeys > 0 {
					status = "MANUAL"
				}
				out = append(out, map[string]any{"domain": name, "keyCount": d.DNSKeys, "dnsSecStatus": status})
			}
		}
		return ok(map[string]any{"data": out})
	case "dnssec.deleteall":
		d, found := s.domains[str(p, "domainName")]
		if !found {
			return fail(2303, "domain not in this account")
		}
		d.DNSKeys = 0
		return ok(nil)
	case "contact.create", "contact.update":
		return s.putContact(method, p)
	case "contact.info":
		c, ok2 := s.contacts[num(p, "id")]
		if !ok2 {
			return fail(2303, "no such contact")
		}
		return ok(map[string]any{"contact": contactData(c)})
	case "contact.list":
		out := []any{}
		for id := 1000; id < s.nextContact; id++ {
			if c, ok2 := s.contacts[id]; ok2 {
				out = append(out, contactData(c))
			}
		}
		return ok(map[string]any{"count": len(out), "contact": out})
	case "contact.delete":
		id := num(p, "id")
		if _, ok2 := s.contacts[id]; !ok2 {
			return fail(2303, "no such contact")
		}
		for _, d := range s.domains {
			if d.Registrant == id {
				return fail(2305, "the contact holds a domain")
			}
		}
		delete(s.contacts, id)
		return ok(nil)
	}
	return fail(2000, "no such method")
}

func (s *Server) check(p map[string]any) result {
	var names []string
	switch v := p["domain"].(type) {
	case string:
		names = []string{v}
	case []any:
		for _, n := range v {
			if n, isStr := n.(string); isStr {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return fail(2003, "domain missing")
	}
	out := []any{}
	for _, n := range names {
		if !hostName.MatchString(n) {
			return fail(2005, "not a domain name")
		}
		price, known := s.prices[tld(n)]
		avail, status := 1, "free"
		switch {
		case !known:
			avail, status = 0, "invalid"
		case s.taken[n] || s.domains[n] != nil || s.foreign[n] != "":
			avail, status = 0, "taken"
		}
		entry := map[string]any{"domain": n, "avail": avail, "status": status, "checkmethod": "whois", "checktime": 0.01}
		if known {
			entry["price"] = json.Number(price)
		}
		out = append(out, entry)
	}
	return ok(map[string]any{"domain": out})
}

// transferPrice is what a transfer in costs beside a TLD's yearly price.
const transferPrice = "7.50"

func (s *Server) getPrices(p map[string]any) result {
	raw, _ := p["tld"].([]any)
	out := []any{}
	for _, t := range raw {
		tld, _ := t.(string)
		if price, known := s.prices[tld]; known {
			out = append(out, map[string]any{"tld": tld, "currency": "EUR", "createPrice": json.Number(price),
				"renewalPrice": json.Number(price), "transferPrice": json.Number(transferPrice), "createPeriod": 12})
		}
	}
	return ok(map[string]any{"price": out})
}

func (s *Server) contactsOK(p map[string]any) result {
	for _, k := range []string{"registrant", "admin", "tech", "billing"} {
		if _, ok2 := s.contacts[num(p, k)]; !ok2 {
			return fail(2303, k+" is no contact of this account")
		}
	}
	return result{}
}

func (s *Server) nameservers(p map[string]any) ([]string, bool) {
	raw, given := p["ns"].([]any)
	if !given {
		return nil, true
	}
	var ns []string
	for _, n := range raw {
		h, isStr := n.(string)
		if !isStr || !hostName.MatchString(h) {
			return nil, false
		}
		ns = append(ns, h)
	}
	return ns, true
}

func (s *Server) create(p map[string]any) result {
	name := str(p, "domain")
	if name == "" {
		return fail(2003, "domain missing")
	}
	if !hostName.MatchString(name) {
		return fail(2005, "not a domain name")
	}
	if _, known := s.prices[tld(name)]; !known {
		return fail(2306, "this TLD is not offered")
	}
	if s.taken[name] || s.domains[name] != nil || s.foreign[name] != "" {
		return fail(2302, "domain exists")
	}
	per := str(p, "period")
	if per == "" {
		per = "1Y"
	}
	if !period.MatchString(per) {
		return fail(2004, "period out of range")
	}
	if r := s.contactsOK(p); r.Code != 0 {
		return r
	}
	ns, good := s.nameservers(p)
	if !good {
		return fail(2005, "ns is not a list of host names")
	}
	years, _ := strconv.Atoi(strings.TrimSuffix(per, "Y"))
	d := &Domain{Name: name, Expires: time.Now().UTC().Truncate(time.Second).AddDate(years, 0, 0), Nameservers: ns,
		AuthCode: token(), Registrant: num(p, "registrant"), pendingLeft: s.pendingPolls, pendingState: "PENDING CREATE"}
	if n, found := s.pendingFor[name]; found {
		d.pendingLeft = n
	}
	s.domains[name] = d
	data := map[string]any{"roId": len(s.domains), "price": json.Number(s.prices[tld(name)]), "currency": "EUR"}
	if d.pendingLeft > 0 {
		return result{Code: 1001, Msg: eppText[1001], ResData: data}
	}
	return ok(data)
}

func token() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "Ab1-" + hex.EncodeToString(b)
}

func (s *Server) info(d *Domain) map[string]any {
	status := "OK"
	if d.pendingLeft > 0 {
		status = d.pendingState
	}
	lock := 0
	if d.Locked {
		lock = 1
	}
	ns := []string{}
	ns = append(ns, d.Nameservers...)
	return map[string]any{"roId": 1, "domain": d.Name, "domainAce": d.Name, "status": status,
		"exDate": d.Expires.Format(time.RFC3339), "transferLock": lock, "ns": ns, "authCode": d.AuthCode,
		"registrant": d.Registrant, "renewalMode": "AUTOEXPIRE"}
}

func (s *Server) list(p map[string]any) result {
	page, limit := num(p, "page"), num(p, "pagelimit")
	if page < 1 {
		page = 1
	}
	if limit < 1 {
		limit = 20
	}
	var names []string
	for n := range s.domains {
		names = append(names, n)
	}
	slices.Sort(names)
	out := []any{}
	for i := (page - 1) * limit; i < len(names) && i < page*limit; i++ {
		out = append(out, s.info(s.domains[names[i]]))
	}
	return ok(map[string]any{"count": strconv.Itoa(len(names)), "domain": out})
}

func (s *Server) renew(p map[string]any) result {
	d, found := s.domains[str(p, "domain")]
	if !found {
		return fail(2303, "domain not in this account")
	}
	if str(p, "expiration") != d.Expires.Format("2006-01-02") {
		return fail(2004, "expiration is not the domain's current expiry")
	}
	per := str(p, "period")
	if !period.MatchString(per) {
		return fail(2004, "period out of range")
	}
	years, _ := strconv.Atoi(strings.TrimSuffix(per, "Y"))
	d.Expires = d.Expires.AddDate(years, 0, 0)
	return ok(map[string]any{"exDate": d.Expires.Format(time.RFC3339), "price": json.Number(s.prices[tld(d.Name)])})
}

func (s *Server) update(p map[string]any) result {
	d, found := s.domains[str(p, "domain")]
	if !found {
		return fail(2303, "domain not in this account")
	}
	if d.pendingLeft > 0 {
		return fail(2304, "the domain is pending")
	}
	if _, given := p["ns"]; given {
		ns, good := s.nameservers(p)
		if !good || len(ns) == 0 {
			return fail(2005, "ns is not a list of host names")
		}
		d.Nameservers = ns
	}
	if _, given := p["transferLock"]; given {
		switch num(p, "transferLock") {
		case 0:
			d.Locked = false
		case 1:
			d.Locked = true
		default:
			return fail(2004, "transferLock is 0 or 1")
		}
	}
	return ok(nil)
}

func (s *Server) transfer(p map[string]any) result {
	name := str(p, "domain")
	if s.domains[name] != nil {
		return fail(2302, "domain is in this account already")
	}
	code, found := s.foreign[name]
	if !found {
		return fail(2303, "domain is registered nowhere")
	}
	if str(p, "authCode") != code {
		return fail(2202, "wrong auth code")
	}
	delete(s.foreign, name)
	s.domains[name] = &Domain{Name: name, Expires: time.Now().UTC().Truncate(time.Second).AddDate(1, 0, 0),
		AuthCode: token(), Registrant: num(p, "registrant"), pendingLeft: max(s.pendingPolls, s.pendingFor[name], 1), pendingState: "PENDING TRANSFER"}
	return result{Code: 1001, Msg: eppText[1001], ResData: map[string]any{"price": json.Number(s.prices[tld(name)])}}
}

func (s *Server) putContact(method string, p map[string]any) result {
	for _, k := range []string{"name", "street", "city", "pc", "cc", "voice", "email"} {
		if str(p, k) == "" {
			return fail(2003, k+" missing")
		}
	}
	if len(str(p, "cc")) != 2 || !eppPhone.MatchString(str(p, "voice")) || !strings.Contains(str(p, "email"), "@") {
		return fail(2005, "cc, voice or email malformed")
	}
	c := &Contact{Type: str(p, "type"), Name: str(p, "name"), Org: str(p, "org"), Street: str(p, "street"),
		City: str(p, "city"), PC: str(p, "pc"), CC: str(p, "cc"), Voice: str(p, "voice"), Email: str(p, "email")}
	if method == "contact.update" {
		old, found := s.contacts[num(p, "id")]
		if !found {
			return fail(2303, "no such contact")
		}
		c.ID, c.Type = old.ID, old.Type
		s.contacts[c.ID] = c
		return ok(nil)
	}
	if c.Type != "PERSON" && c.Type != "ORG" {
		return fail(2004, "type is PERSON or ORG")
	}
	c.ID = s.nextContact
	s.nextContact++
	s.contacts[c.ID] = c
	return ok(map[string]any{"id": c.ID})
}

func contactData(c *Contact) map[string]any {
	return map[string]any{"id": c.ID, "roId": c.ID, "type": c.Type, "name": c.Name, "org": c.Org, "street": c.Street,
		"city": c.City, "pc": c.PC, "cc": c.CC, "voice": c.Voice, "email": c.Email}
}

// String names the server in test logs.
func (s *Server) String() string { return fmt.Sprintf("DomRobot test server at %s", s.URL()) }
