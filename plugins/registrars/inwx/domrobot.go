package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
	"github.com/fedhost/fedhost/sdk"
)

// Result codes of DomRobot: those of EPP (RFC 5730, section 3).
const (
	codeOK           = 1000
	codePending      = 1001
	codeAuthError    = 2200
	codeAuthClosing  = 2501
	codeSessionLimit = 2502
)

// maxBody bounds an answer read from DomRobot.
const maxBody = 4 << 20

// rateRetries is how often a rate-limited call is tried again before it fails
// unavailable.
const rateRetries = 3

// response is DomRobot's answer to every method.
type response struct {
	Code       int             `json:"code"`
	Msg        string          `json:"msg"`
	ReasonCode string          `json:"reasonCode"`
	ResData    json.RawMessage `json:"resData"`
}

// parseResponse reads one JSON-RPC answer.
func parseResponse(body []byte) (response, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return response{}, fmt.Errorf("the answer is not DomRobot's JSON: %w", err)
	}
	if r.Code < 1000 || r.Code > 2999 {
		return response{}, fmt.Errorf("the answer has no result code")
	}
	return r, nil
}

// domrobot calls the JSON-RPC API in one session: account.login sets the session
// cookie, which the jar sends with every later call.
type domrobot struct {
	cfg  *config
	http *http.Client

	// mu makes one login at a time; loggedIn says a session cookie is held.
	mu       sync.Mutex
	loggedIn bool
}

func newDomrobot(c *config) *domrobot {
	jar, _ := cookiejar.New(nil) // never fails without options
	return &domrobot{cfg: c, http: &http.Client{Jar: jar, Timeout: c.timeout}}
}

// call runs method with params and decodes resData into out (if not nil); it logs in
// first when no session is held, and again once when the session has ended. It returns
// the result code, codeOK or codePending; any other code is an error, field naming the
// request field an answer about bad parameters concerns.
func (d *domrobot) call(ctx context.Context, method string, params map[string]any, out any, field string) (int, error) {
	if err := d.login(ctx, false); err != nil {
		return 0, err
	}
	r, err := d.post(ctx, method, params)
	if err == nil && (r.Code == codeAuthError || r.Code == codeAuthClosing) {
		if err = d.login(ctx, true); err == nil {
			r, err = d.post(ctx, method, params)
		}
	}
	if err != nil {
		return 0, err
	}
	if r.Code != codeOK && r.Code != codePending && r.Code != 1300 && r.Code != 1500 {
		return 0, codeError(method, r, field)
	}
	if out != nil && len(r.ResData) > 0 {
		if err := json.Unmarshal(r.ResData, out); err != nil {
			return 0, sdk.Errorf(sdk.CodeInternal, "INWX %s: the answer's resData is not as documented: %v", method, err)
		}
	}
	if r.Code == codePending {
		return codePending, nil
	}
	return codeOK, nil
}

// login starts a session unless one is held (or again, when again is set).
func (d *domrobot) login(ctx context.Context, again bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loggedIn && !again {
		return nil
	}
	d.loggedIn = false
	r, err := d.post(ctx, "account.login", map[string]any{"user": d.cfg.user, "pass": d.cfg.pass, "lang": "en"})
	if err != nil {
		return err
	}
	switch {
	case r.Code == codeOK:
	case r.Code == codeAuthError || r.Code == codeAuthClosing || r.Code == 2201 || r.Code == 2202:
		return sdk.Invalid("settings/password_file", "INWX refused the login (code %d): check the account name and password in the files the settings name", r.Code)
	default:
		return codeError("account.login", r, "settings/username_file")
	}
	var res struct {
		TFA json.RawMessage `json:"tfa"`
	}
	_ = json.Unmarshal(r.ResData, &res)
	if t := strings.Trim(string(res.TFA), `"`); t != "" && t != "0" && t != "null" {
		return sdk.Invalid("settings/username_file", "this INWX account asks for a second factor: use an API sub-account without two-factor login")
	}
	d.loggedIn = true
	return nil
}

// post sends one JSON-RPC request, backing off while DomRobot answers a rate limit.
func (d *domrobot) post(ctx context.Context, method string, params map[string]any) (response, error) {
	body, err := json.Marshal(map[string]any{"method": method, "params": params})
	if err != nil {
		return response{}, sdk.Errorf(sdk.CodeInternal, "INWX %s: encoding the request: %v", method, err)
	}
	wait := time.Second
	for try := 0; ; try++ {
		r, retryAfter, err := d.postOnce(ctx, method, body)
		limited := retryAfter >= 0 || (err == nil && r.Code == codeSessionLimit)
		if !limited {
			return r, err
		}
		if try == rateRetries {
			return response{}, sdk.Unavailable("INWX %s: the API's rate limit held after %d tries: try again later", method, try+1)
		}
		if retryAfter > 0 {
			wait = retryAfter
		}
		select {
		case <-ctx.Done():
			return response{}, sdk.Unavailable("INWX %s: gave up waiting out the rate limit: %v", method, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// postOnce sends body; retryAfter is -1 unless the server answered 429 (0 when it named
// no delay).
func (d *domrobot) postOnce(ctx context.Context, method string, body []byte) (r response, retryAfter time.Duration, err error) {
	retryAfter = -1
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.url, bytes.NewReader(body))
	if err != nil {
		return response{}, -1, sdk.Invalid("settings/base_url", "not a URL a request can be sent to")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := d.http.Do(req)
	if err != nil {
		return response{}, -1, sdk.Unavailable("INWX %s: the API cannot be reached: %v", method, unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return response{}, -1, sdk.Unavailable("INWX %s: reading the answer: %v", method, err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return response{}, time.Duration(min(max(secs, 0), 60)) * time.Second, nil
	case resp.StatusCode >= 500:
		return response{}, -1, sdk.Unavailable("INWX %s: the API answered HTTP %d: try again later", method, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return response{}, -1, sdk.Errorf(sdk.CodeInternal, "INWX %s: the API answered HTTP %d, not a JSON-RPC answer: check settings/base_url", method, resp.StatusCode)
	}
	r, err = parseResponse(raw)
	if err != nil {
		return response{}, -1, sdk.Errorf(sdk.CodeInternal, "INWX %s: %v: check settings/base_url", method, err)
	}
	return r, -1, nil
}

// unwrapURL drops the *url.Error wrapper, whose text repeats the method and URL.
func unwrapURL(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

// codeError maps an error result code to the sdk's codes. The message carries DomRobot's
// msg (the code's standard text) and reasonCode, bounded, never the reason text, which
// may repeat what was sent.
func codeError(method string, r response, field string) error {
	what := fmt.Sprintf("INWX %s answered %d %q", method, r.Code, reqcheck.Text(r.Msg, 120))
	if rc := reqcheck.Text(r.ReasonCode, 60); rc != "" {
		what += " (" + rc + ")"
	}
	if field == "" {
		field = "domain"
	}
	switch r.Code {
	case 2003, 2004, 2005, 2306, 2308:
		return sdk.Invalid(field, "%s: the registry refuses this value", what)
	case 2105, 2106, 2300, 2301, 2304, 2305:
		return sdk.Invalid(field, "%s: the domain's state does not allow this now", what)
	case 2202:
		return sdk.Invalid(field, "%s: the authorization information is wrong", what)
	case 2302:
		return sdk.Conflict("%s: it exists already", what)
	case 2303:
		return sdk.NotFound("%s: no such object in this account", what)
	case 2104:
		return sdk.LimitExceeded("%s: the account cannot pay for this: top up its balance", what)
	case 2201:
		return sdk.Invalid("settings/username_file", "%s: the account may not do this: give it the right or use another account", what)
	case 2101, 2102, 2103, 2307:
		return sdk.Errorf(sdk.CodeUnsupported, "%s", what)
	case 2400, 2500, codeSessionLimit:
		return sdk.Unavailable("%s: try again later", what)
	}
	return sdk.Errorf(sdk.CodeInternal, "%s", what)
}
