// Package porkbuntest runs, for tests, an HTTP server on loopback that answers the
// domain calls of Porkbun's JSON API v3 the way Porkbun documents them: every call a
// POST of a JSON object carrying apikey and secretapikey (refused otherwise), every
// answer {"status":"SUCCESS"|"ERROR","message":...}, prices as USD strings, costs in
// cents that must match the current price, Idempotency-Key replays, a rate limit on
// checkDomain, registrations and transfers the registry keeps pending for a while, and
// faults a test asks for (server errors, lost answers, slow answers).
package porkbuntest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Prefix is the path of API v3 on the server; URL ends with it.
const Prefix = "/api/json/v3"

// Options shape a server; zero values take the defaults.
type Options struct {
	// PendingFor is how long a pending registration or a transfer stays pending (2 s).
	PendingFor time.Duration
	// CheckLimit checkDomain calls are allowed per CheckWindow (10 per 10 s); more are
	// refused with HTTP 429 and Porkbun's rate-limit message.
	CheckLimit  int
	CheckWindow time.Duration
}

// Server is one Porkbun account and the registry around it.
type Server struct {
	// URL is the API's base, to give the driver as base_url.
	URL string
	// APIKey and SecretKey are the account's key pair.
	APIKey, SecretKey string

	srv  *httptest.Server
	opts Options

	mu        sync.Mutex
	prices    map[string]price // by TLD
	taken     map[string]bool  // held at another registrar, not transferable here
	external  map[string]external
	pending   map[string]bool // registrations the registry keeps pending
	account   map[string]*domain
	transfers map[string]*transfer
	idem      map[string]replay
	checks    []time.Time
	faults    []fault
	charged   int64 // cents
	creates   int
	orderID   int
}

type price struct{ registration, renewal, transfer string }

type external struct {
	authCode string
	expires  time.Time
}

type domain struct {
	name         string
	created      time.Time
	expires      time.Time
	pendingUntil time.Time
	ns           []string
	lock         bool
}

type transfer struct {
	id      int
	created time.Time
	doneAt  time.Time
	expires time.Time
}

type replay struct {
	path   string
	status int
	body   []byte
}

type fault struct {
	status     int           // answer this instead (0: carry the call out)
	delay      time.Duration // before answering
	loseAnswer bool          // carry the call out, then answer status
	endpoint   string        // only for calls of this endpoint, below Prefix ("": any)
}

// Start runs a server on a loopback port; Close stops it.
func Start(opts Options) *Server {
	if opts.PendingFor == 0 {
		opts.PendingFor = 2 * time.Second
	}
	if opts.CheckLimit == 0 {
		opts.CheckLimit = 10
	}
	if opts.CheckWindow == 0 {
		opts.CheckWindow = 10 * time.Second
	}
	s := &Server{
		APIKey: "pk1_" + randomHex(32), SecretKey: "sk1_" + randomHex(32), opts: opts,
		prices: map[string]price{
			"com":  {"11.08", "11.08", "11.08"},
			"test": {"9.73", "10.81", "9.73"},
			"dev":  {"12.87", "12.87", "12.87"},
		},
		taken: map[string]bool{}, external: map[string]external{}, pending: map[string]bool{},
		account: map[string]*domain{}, transfers: map[string]*transfer{}, idem: map[string]replay{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Prefix+"/ping", s.authed(s.ping))
	mux.HandleFunc("POST "+Prefix+"/domain/checkDomain/{domain}", s.authed(s.checkDomain))
	mux.HandleFunc("POST "+Prefix+"/domain/create/{domain}", s.authed(s.keyed(s.create)))
	mux.HandleFunc("POST "+Prefix+"/domain/renew/{domain}", s.authed(s.keyed(s.renew)))
	mux.HandleFunc("POST "+Prefix+"/domain/transfer/{domain}", s.authed(s.keyed(s.transfer)))
	mux.HandleFunc("POST "+Prefix+"/domain/getTransfer/{domain}", s.authed(s.getTransfer))
	mux.HandleFunc("POST "+Prefix+"/domain/updateNs/{domain}", s.authed(s.updateNs))
	mux.HandleFunc("POST "+Prefix+"/domain/getNs/{domain}", s.authed(s.getNs))
	mux.HandleFunc("POST "+Prefix+"/domain/listAll", s.authed(s.listAll))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusNotFound, errorBody("", "Invalid endpoint."))
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + Prefix
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

func randomHex(n int) string {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Taken makes a domain held elsewhere: checkDomain answers it unavailable.
func (s *Server) Taken(name string) { s.mu.Lock(); s.taken[name] = true; s.mu.Unlock() }

// External makes a domain held at another registrar that authCode transfers here.
func (s *Server) External(name, authCode string, expires time.Time) {
	s.mu.Lock()
	s.external[name] = external{authCode: authCode, expires: expires.UTC().Truncate(time.Second)}
	s.mu.Unlock()
}

// Pending makes the registration of name stay pending for Options.PendingFor.
func (s *Server) Pending(name string) { s.mu.Lock(); s.pending[name] = true; s.mu.Unlock() }

// Owned puts a domain in the account, registered at created for a year.
func (s *Server) Owned(name string, created time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	created = created.UTC().Truncate(time.Second)
	s.account[name] = &domain{name: name, created: created, expires: created.AddDate(1, 0, 0), ns: defaultNS(), lock: true}
}

// Age moves a domain of the account back in time by d, its registration and its expiry
// both, as if it had been registered d earlier: a year's domain aged 340 days expires
// within 30 days and may be renewed. It reports whether the account holds the domain.
func (s *Server) Age(name string, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	dom, ok := s.account[name]
	if ok {
		dom.created, dom.expires = dom.created.Add(-d), dom.expires.Add(-d)
	}
	return ok
}

// Price sets a TLD's prices (USD, as Porkbun writes them: "9.73").
func (s *Server) Price(tld, registration, renewal, transfer string) {
	s.mu.Lock()
	s.prices[tld] = price{registration, renewal, transfer}
	s.mu.Unlock()
}

// Fail answers the next n calls with HTTP status and no JSON, as a proxy in front of a
// failing server does.
func (s *Server) Fail(n, status int) { s.addFaults(n, fault{status: status}) }

// Delay holds the answer of the next n calls for d.
func (s *Server) Delay(n int, d time.Duration) { s.addFaults(n, fault{delay: d}) }

// LoseAnswer carries the next n calls out but answers them HTTP status, as when the
// answer is lost on the way back.
func (s *Server) LoseAnswer(n, status int) { s.addFaults(n, fault{status: status, loseAnswer: true}) }

// FailCall answers the next n calls of one endpoint ("domain/create") with HTTP
// status, and no other call: a test's fault then reaches the call it is meant for while
// the host's scheduler lists the account at the same time.
func (s *Server) FailCall(endpoint string, n, status int) {
	s.addFaults(n, fault{status: status, endpoint: endpoint})
}

// DelayCall holds the answer of the next n calls of one endpoint for d.
func (s *Server) DelayCall(endpoint string, n int, d time.Duration) {
	s.addFaults(n, fault{delay: d, endpoint: endpoint})
}

func (s *Server) addFaults(n int, f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults = append(s.faults, f)
	}
}

// Charged is what the account paid, in cents; Creates counts registrations carried out.
func (s *Server) Charged() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.charged }

// Creates counts the registrations carried out.
func (s *Server) Creates() int { s.mu.Lock(); defer s.mu.Unlock(); return s.creates }

func defaultNS() []string {
	return []string{"curitiba.ns.porkbun.com", "fortaleza.ns.porkbun.com", "maceio.ns.porkbun.com", "salvador.ns.porkbun.com"}
}

const dateLayout = "2006-01-02 15:04:05"

type handler func(r *http.Request, body map[string]any) (int, any)

func answer(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func errorBody(code, msg string) map[string]any {
	m := map[string]any{"status": "ERROR", "message": msg}
	if code != "" {
		m["code"] = code
	}
	return m
}

func success(fields map[string]any) map[string]any {
	m := map[string]any{"status": "SUCCESS"}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

// authed takes the next fault, reads the body and checks the key pair, as every
// Porkbun endpoint but pricing does.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		var f fault
		for i, c := range s.faults {
			if c.endpoint == "" || strings.HasPrefix(r.URL.Path, Prefix+"/"+c.endpoint+"/") || r.URL.Path == Prefix+"/"+c.endpoint {
				f, s.faults = c, slices.Delete(s.faults, i, i+1)
				break
			}
		}
		s.mu.Unlock()
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		}
		if f.status != 0 && !f.loseAnswer {
			w.WriteHeader(f.status)
			fmt.Fprintf(w, "<html><body>%d %s</body></html>", f.status, http.StatusText(f.status))
			return
		}
		var body map[string]any
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		if err := dec.Decode(&body); err != nil {
			answer(w, http.StatusBadRequest, errorBody("", "Invalid JSON sent."))
			return
		}
		if body["apikey"] != s.APIKey || body["secretapikey"] != s.SecretKey {
			answer(w, http.StatusBadRequest, errorBody("", "Invalid API key. (002)"))
			return
		}
		status, v := h(r, body)
		if f.loseAnswer {
			w.WriteHeader(f.status)
			return
		}
		answer(w, status, v)
	}
}

// keyed replays the first answer to a call with the same Idempotency-Key, as Porkbun
// does for writes within a day; the key on another endpoint is refused.
func (s *Server) keyed(h handler) handler {
	return func(r *http.Request, body map[string]any) (int, any) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			return h(r, body)
		}
		s.mu.Lock()
		prev, seen := s.idem[key]
		s.mu.Unlock()
		if seen {
			if prev.path != r.URL.Path {
				return http.StatusUnprocessableEntity, errorBody("IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used for another request.")
			}
			return prev.status, json.RawMessage(prev.body)
		}
		status, v := h(r, body)
		b, _ := json.Marshal(v)
		s.mu.Lock()
		s.idem[key] = replay{path: r.URL.Path, status: status, body: b}
		s.mu.Unlock()
		return status, v
	}
}

func (s *Server) ping(r *http.Request, _ map[string]any) (int, any) {
	return http.StatusOK, success(map[string]any{"yourIp": "127.0.0.1"})
}

func tldOf(name string) string { return name[strings.LastIndex(name, ".")+1:] }

// cents reads "9.73" as 973.
func cents(p string) int64 {
	whole, frac, _ := strings.Cut(p, ".")
	w, _ := strconv.ParseInt(whole, 10, 64)
	frac = (frac + "00")[:2]
	f, _ := strconv.ParseInt(frac, 10, 64)
	return w*100 + f
}

// costOf reads a cost as Porkbun takes it: a number or a string of digits.
func costOf(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		return int64(x), x == float64(int64(x))
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func (s *Server) checkDomain(r *http.Request, _ map[string]any) (int, any) {
	name := strings.ToLower(r.PathValue("domain"))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	kept := s.checks[:0]
	for _, t := range s.checks {
		if now.Sub(t) < s.opts.CheckWindow {
			kept = append(kept, t)
		}
	}
	s.checks = kept
	if len(s.checks) >= s.opts.CheckLimit {
		return http.StatusTooManyRequests, errorBody("RATE_LIMIT_EXCEEDED",
			fmt.Sprintf("Rate limit exceeded: %d out of %d checks within %d seconds used.", len(s.checks), s.opts.CheckLimit, int(s.opts.CheckWindow.Seconds())))
	}
	s.checks = append(s.checks, now)
	p, ok := s.prices[tldOf(name)]
	if !ok || !strings.Contains(name, ".") {
		return http.StatusBadRequest, errorBody("TLD_NOT_SUPPORTED", "This TLD is not supported.")
	}
	_, held := s.account[name]
	_, elsewhere := s.external[name]
	avail := "yes"
	if held || elsewhere || s.taken[name] {
		avail = "no"
	}
	return http.StatusOK, success(map[string]any{
		"response": map[string]any{
			"avail": avail, "type": "registration", "price": p.registration, "firstYearPromo": "no",
			"regularPrice": p.registration, "premium": "no",
			"additional": map[string]any{
				"renewal":  map[string]any{"type": "renewal", "price": p.renewal, "regularPrice": p.renewal},
				"transfer": map[string]any{"type": "transfer", "price": p.transfer, "regularPrice": p.transfer},
			},
		},
		"limits": map[string]any{"TTL": strconv.Itoa(int(s.opts.CheckWindow.Seconds())), "limit": strconv.Itoa(s.opts.CheckLimit),
			"used": len(s.checks), "naturalLanguage": fmt.Sprintf("%d out of %d checks within %d seconds used.", len(s.checks), s.opts.CheckLimit, int(s.opts.CheckWindow.Seconds()))},
	})
}

func (s *Server) create(r *http.Request, body map[string]any) (int, any) {
	name := strings.ToLower(r.PathValue("domain"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if body["agreeToTerms"] != "yes" {
		return http.StatusBadRequest, errorBody("TERMS_NOT_AGREED", "You must agree to the terms of service (agreeToTerms: yes).")
	}
	p, ok := s.prices[tldOf(name)]
	if !ok {
		return http.StatusBadRequest, errorBody("TLD_NOT_SUPPORTED", "This TLD is not supported.")
	}
	_, held := s.account[name]
	_, elsewhere := s.external[name]
	if held || elsewhere || s.taken[name] {
		return http.StatusBadRequest, errorBody("DOMAIN_NOT_AVAILABLE", "This domain is not available to register.")
	}
	cost, ok := costOf(body["cost"])
	if !ok || cost != cents(p.registration) {
		return http.StatusBadRequest, errorBody("PRICE_MISMATCH", "The cost does not match the current price of the domain.")
	}
	now := time.Now().UTC().Truncate(time.Second)
	d := &domain{name: name, created: now, expires: now.AddDate(1, 0, 0), ns: defaultNS(), lock: true}
	if s.pending[name] {
		d.pendingUntil = time.Now().Add(s.opts.PendingFor)
	}
	s.account[name] = d
	s.charged += cost
	s.creates++
	s.orderID++
	return http.StatusOK, success(map[string]any{"domain": name, "cost": cost, "orderId": s.orderID})
}

func (s *Server) renew(r *http.Request, body map[string]any) (int, any) {
	name := strings.ToLower(r.PathValue("domain"))
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.account[name]
	if !ok {
		return http.StatusBadRequest, errorBody("DOMAIN_NOT_FOUND", "Domain not found in this account, or API access is not enabled for it.")
	}
	if time.Since(d.created) < 30*24*time.Hour {
		return http.StatusBadRequest, errorBody("RENEWAL_TOO_SOON", "This domain was registered within the last 30 days and cannot be renewed yet.")
	}
	cost, ok := costOf(body["cost"])
	if !ok || cost != cents(s.prices[tldOf(name)].renewal) {
		return http.StatusBadRequest, errorBody("PRICE_MISMATCH", "The cost does not match the current renewal price of the domain.")
	}
	d.expires = d.expires.AddDate(1, 0, 0)
	s.charged += cost
	s.orderID++
	return http.StatusOK, success(map[string]any{"domain": name, "cost": cost, "orderId": s.orderID})
}

func (s *Server) transfer(r *http.Request, body map[string]any) (int, any) {
	name := strings.ToLower(r.PathValue("domain"))
	s.mu.Lock()
	defer s.mu.Unlock()
	ext, ok := s.external[name]
	if !ok {
		return http.StatusBadRequest, errorBody("DOMAIN_NOT_TRANSFERABLE", "This domain cannot be transferred in.")
	}
	if _, busy := s.transfers[name]; busy {
		return http.StatusBadRequest, errorBody("TRANSFER_EXISTS", "A transfer of this domain is in progress.")
	}
	cost, ok := costOf(body["cost"])
	if !ok || cost != cents(s.prices[tldOf(name)].transfer) {
		return http.StatusBadRequest, errorBody("PRICE_MISMATCH", "The cost does not match the current transfer price of the domain.")
	}
	if code, _ := body["authCode"].(string); code != ext.authCode {
		return http.StatusBadRequest, errorBody("INVALID_AUTH_CODE", "The auth code is not correct for this domain.")
	}
	s.orderID++
	s.transfers[name] = &transfer{id: s.orderID, created: time.Now(), doneAt: time.Now().Add(s.opts.PendingFor), expires: ext.expires.AddDate(1, 0, 0)}
	s.charged += cost
	return http.StatusOK, success(map[string]any{"domain": name, "transferId": s.orderID})
}

// settle moves a finished transfer into the account; the caller holds s.mu.
func (s *Server) settle(name string) {
	t, ok := s.transfers[name]
	if !ok || time.Now().Before(t.doneAt) {
		return
	}
	if _, held := s.account[name]; !held {
		now := time.Now().UTC().Truncate(time.Second)
		s.account[name] = &domain{name: name, created: now.AddDate(-1, 0, 0), expires: t.expires, ns: defaultNS(), lock: true}
		delete(s.external, name)
	}
}

func (s *Server) getTransfer(r *http.Request, _ map[string]any) (int, any) {
	name := strings.ToLower(r.PathValue("domain"))
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.transfers[name]
	if !ok {
		return http.StatusBadRequest, errorBody("TRANSFER_NOT_FOUND", "No transfer was found for this domain.")
	}
	s.settle(name)
	status := "PENDINGTRANSFER"
	if !time.Now().Before(t.doneAt) {
		status = "DONE"
	}
	return http.StatusOK, success(map[string]any{"transfer": map[string]any{
		"id": t.id, "domain": name, "status": status, "createDate": t.created.UTC().Format(dateLayout)}})
}

func (s *Server) held(name string) (*domain, bool) {
	s.settle(name)
	d, ok := s.account[name]
	return d, ok
}

func (s *Server) updateNs(r *http.Request, body map[string]any) (int, any) {
	name := strings.ToLower(r.PathValue("domain"))
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.held(name)
	if !ok {
		return http.StatusBadRequest, errorBody("DOMAIN_NOT_FOUND", "Domain not found in this account, or API access is not enabled for it.")
	}
	list, _ := body["ns"].([]any)
	var ns []string
	for _, v := range list {
		if h, ok := v.(string); ok && h != "" && !strings.ContainsAny(h, " /") {
			ns = append(ns, strings.ToLower(h))
		} else {
			return http.StatusBadRequest, errorBody("INVALID_NAMESERVER", "A nameserver is not a valid host name.")
		}
	}
	if len(ns) == 0 {
		return http.StatusBadRequest, errorBody("INVALID_NAMESERVER", "Give at least one nameserver.")
	}
	d.ns = ns
	return http.StatusOK, success(nil)
}

func (s *Server) getNs(r *http.Request, _ map[string]any) (int, any) {
	name := strings.ToLower(r.PathValue("domain"))
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.held(name)
	if !ok {
		return http.StatusBadRequest, errorBody("DOMAIN_NOT_FOUND", "Domain not found in this account, or API access is not enabled for it.")
	}
	return http.StatusOK, success(map[string]any{"ns": slices.Clone(d.ns)})
}

func (s *Server) listAll(_ *http.Request, body map[string]any) (int, any) {
	start := 0
	switch v := body["start"].(type) {
	case string:
		start, _ = strconv.Atoi(v)
	case float64:
		start = int(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.transfers {
		s.settle(name)
	}
	names := make([]string, 0, len(s.account))
	for n := range s.account {
		names = append(names, n)
	}
	slices.Sort(names)
	out := []map[string]any{}
	for i := start; i < len(names) && i < start+1000; i++ {
		d := s.account[names[i]]
		status := "ACTIVE"
		if time.Now().Before(d.pendingUntil) {
			status = "PENDING"
		}
		lock := "0"
		if d.lock {
			lock = "1"
		}
		out = append(out, map[string]any{
			"domain": d.name, "status": status, "tld": tldOf(d.name),
			"createDate": d.created.Format(dateLayout), "expireDate": d.expires.Format(dateLayout),
			"securityLock": lock, "whoisPrivacy": "1", "autoRenew": 0, "notLocal": 0,
		})
	}
	return http.StatusOK, success(map[string]any{"domains": out})
}
