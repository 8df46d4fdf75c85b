package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/fedhost/fedhost/sdk"
)

// maxBody bounds an answer read from the API.
const maxBody = 4 << 20

// rateRetries is how often a rate-limited call is tried again before it fails
// unavailable.
const rateRetries = 3

// envelope is the shape of every answer of the API: code 0 is success.
type envelope struct {
	Code *int            `json:"code"`
	Desc string          `json:"desc"`
	Data json.RawMessage `json:"data"`
}

// parseEnvelope reads one answer.
func parseEnvelope(body []byte) (envelope, error) {
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return envelope{}, fmt.Errorf("the answer is not the API's JSON: %w", err)
	}
	if e.Code == nil {
		return envelope{}, fmt.Errorf("the answer has no code")
	}
	return e, nil
}

// api calls the REST API with a bearer token from auth/login, logging in again when
// the token is older than token_minutes or the API answers 401.
type api struct {
	cfg  *config
	http *http.Client

	mu      sync.Mutex
	token   string
	tokenAt time.Time
}

func newAPI(c *config) *api { return &api{cfg: c, http: &http.Client{Timeout: c.timeout}} }

// bearer returns a token, logging in for a new one when there is none, it is too old, or
// stale is the one the API just refused.
func (a *api) bearer(ctx context.Context, stale string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" && a.token != stale && time.Since(a.tokenAt) < a.cfg.tokenTTL {
		return a.token, nil
	}
	a.token = ""
	var res struct {
		Token string `json:"token"`
	}
	status, env, err := a.send(ctx, http.MethodPost, "auth/login", nil,
		map[string]string{"username": a.cfg.user, "password": a.cfg.pass, "ip": "0.0.0.0"}, "")
	if err != nil {
		return "", err
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden || (status < 500 && *env.Code != 0) {
		return "", sdk.Invalid("settings/password_file", "Openprovider refused the login (HTTP %d, code %d): check the user name and password in the files the settings name", status, *env.Code)
	}
	if err := json.Unmarshal(env.Data, &res); err != nil || res.Token == "" || len(res.Token) > 4096 {
		return "", sdk.Errorf(sdk.CodeInternal, "Openprovider auth/login answered without a token: check settings/base_url")
	}
	a.token, a.tokenAt = res.Token, time.Now()
	return a.token, nil
}

// do calls path with body (JSON, or none when nil) and decodes data into out (if not
// nil). A failure is mapped to the sdk's codes, field naming the request field an answer
// about bad input concerns.
func (a *api) do(ctx context.Context, method, path string, query url.Values, body, out any, field string) error {
	token, err := a.bearer(ctx, "")
	if err != nil {
		return err
	}
	status, env, err := a.send(ctx, method, path, query, body, token)
	if err == nil && status == http.StatusUnauthorized {
		if token, err = a.bearer(ctx, token); err == nil {
			status, env, err = a.send(ctx, method, path, query, body, token)
		}
	}
	if err != nil {
		return err
	}
	if status != http.StatusOK || *env.Code != 0 {
		return statusError(method, path, status, *env.Code, field)
	}
	if out != nil && len(env.Data) > 0 && string(env.Data) != "null" {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return sdk.Errorf(sdk.CodeInternal, "Openprovider %s %s: the answer's data is not as documented: %v", method, path, err)
		}
	}
	return nil
}

// send makes one request, backing off while the API answers 429. A 5xx, a timeout or a
// connection that fails is sdk.CodeUnavailable; any other status comes back with the
// envelope for the caller to judge.
func (a *api) send(ctx context.Context, method, path string, query url.Values, body any, token string) (int, envelope, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, envelope{}, sdk.Errorf(sdk.CodeInternal, "Openprovider %s %s: encoding the request: %v", method, path, err)
		}
	}
	u := a.cfg.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	wait := time.Second
	for try := 0; ; try++ {
		var rd io.Reader
		if raw != nil {
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return 0, envelope{}, sdk.Invalid("settings/base_url", "not a URL a request can be sent to")
		}
		req.Header.Set("Accept", "application/json")
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := a.http.Do(req)
		if err != nil {
			return 0, envelope{}, sdk.Unavailable("Openprovider %s %s: the API cannot be reached: %v", method, path, unwrapURL(err))
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		if err != nil {
			return 0, envelope{}, sdk.Unavailable("Openprovider %s %s: reading the answer: %v", method, path, err)
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			if try == rateRetries {
				return 0, envelope{}, sdk.Unavailable("Openprovider %s %s: the API's rate limit held after %d tries: try again later", method, path, try+1)
			}
			if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
				wait = time.Duration(min(secs, 60)) * time.Second
			}
			select {
			case <-ctx.Done():
				return 0, envelope{}, sdk.Unavailable("Openprovider %s %s: gave up waiting out the rate limit: %v", method, path, ctx.Err())
			case <-time.After(wait):
			}
			wait *= 2
			continue
		case resp.StatusCode >= 500:
			return 0, envelope{}, sdk.Unavailable("Openprovider %s %s: the API answered HTTP %d: try again later", method, path, resp.StatusCode)
		}
		env, err := parseEnvelope(b)
		if err != nil {
			return 0, envelope{}, sdk.Errorf(sdk.CodeInternal, "Openprovider %s %s (HTTP %d): %v: check settings/base_url", method, path, resp.StatusCode, err)
		}
		return resp.StatusCode, env, nil
	}
}

// unwrapURL drops the *url.Error wrapper, whose text repeats the method and URL.
func unwrapURL(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

// statusError maps a refused call to the sdk's codes by its HTTP status. The message
// names the status and the API's code, never desc, which may repeat what was sent.
func statusError(method, path string, status, code int, field string) error {
	what := fmt.Sprintf("Openprovider %s %s answered HTTP %d, code %d", method, path, status, code)
	if field == "" {
		field = "domain"
	}
	switch status {
	case http.StatusNotFound:
		return sdk.NotFound("%s: no such object in this account", what)
	case http.StatusConflict:
		return sdk.Conflict("%s: it exists already", what)
	case http.StatusPaymentRequired:
		return sdk.LimitExceeded("%s: the account cannot pay for this: top up its balance", what)
	case http.StatusForbidden:
		return sdk.Invalid("settings/username_file", "%s: the account may not do this: give it the right or use another account", what)
	case http.StatusUnauthorized:
		return sdk.Invalid("settings/password_file", "%s: the API refused the token", what)
	case http.StatusOK, http.StatusBadRequest, http.StatusUnprocessableEntity:
		return sdk.Invalid(field, "%s: the registry refuses this value", what)
	}
	return sdk.Errorf(sdk.CodeInternal, "%s", what)
}
