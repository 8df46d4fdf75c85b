package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
)

// maxBody bounds what the driver reads of one answer: a listAll page of 1,000 domains is
// about 300 KB.
const maxBody = 4 << 20

// maxMessage bounds a message of Porkbun's that an error passes on.
const maxMessage = 200

// api calls Porkbun's JSON API v3: every call a POST of a JSON object that carries the
// key pair, every answer {"status":"SUCCESS"|"ERROR","message":...}. Written here since
// no Go client of Porkbun's domain (not DNS) calls is published; see README.
type api struct {
	base          string // no trailing slash
	key, secret   string
	http          *http.Client
	retries       int
	backoff       time.Duration // the first pause; it doubles
	maxBackoffGap time.Duration
}

// envelope is what every answer shares.
type envelope struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	// Code is the machine-readable error code newer answers carry (RENEWAL_TOO_SOON).
	Code string `json:"code"`
}

// apiError is an ERROR answer of Porkbun's.
type apiError struct {
	HTTPStatus int
	Code       string
	Message    string // bounded, secrets removed
}

func (e *apiError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("Porkbun answered %s: %s", e.Code, e.Message)
	}
	return "Porkbun answered: " + e.Message
}

// rateLimited reports whether the answer is Porkbun's rate limit.
func (e *apiError) rateLimited() bool {
	m := strings.ToLower(e.Message)
	return e.HTTPStatus == http.StatusTooManyRequests || strings.Contains(m, "rate limit") ||
		strings.Contains(strings.ToLower(e.Code), "rate_limit")
}

// parseResponse reads one answer: the envelope's status decides, and an ERROR (or an
// HTTP status other than 200 without an envelope) is an *apiError. out, when not nil,
// takes the whole body of a SUCCESS.
func parseResponse(httpStatus int, body []byte, out any) error {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		if httpStatus != http.StatusOK {
			return &apiError{HTTPStatus: httpStatus, Message: fmt.Sprintf("HTTP %d without a JSON answer", httpStatus)}
		}
		return fmt.Errorf("Porkbun's answer is not JSON: %w", err)
	}
	switch {
	case env.Status == "SUCCESS" && httpStatus == http.StatusOK:
		if out != nil {
			if err := json.Unmarshal(body, out); err != nil {
				return fmt.Errorf("Porkbun's answer has an unexpected shape: %w", err)
			}
		}
		return nil
	case env.Status == "ERROR" || httpStatus != http.StatusOK:
		msg := env.Message
		if msg == "" {
			msg = fmt.Sprintf("HTTP %d", httpStatus)
		}
		return &apiError{HTTPStatus: httpStatus, Code: bounded(env.Code, 64), Message: bounded(msg, maxMessage)}
	}
	return fmt.Errorf("Porkbun's answer has no status SUCCESS or ERROR")
}

// bounded cuts s to n bytes on a rune boundary and drops control characters.
func bounded(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// call posts body (with the key pair added) to path and decodes a SUCCESS into out.
// retryWrites says whether the call may be sent again after a server error or a
// timeout: true for reads and for writes with an idempotency key. A rate-limited call
// was not carried out and is always sent again, after a pause that doubles (or the
// Retry-After Porkbun gives).
func (a *api) call(ctx context.Context, path string, body map[string]any, idempotencyKey string, retryWrites bool, out any) error {
	if body == nil {
		body = map[string]any{}
	}
	body["apikey"], body["secretapikey"] = a.key, a.secret
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	pause := a.backoff
	for attempt := 0; ; attempt++ {
		wait, err := a.once(ctx, path, payload, idempotencyKey, out)
		if err == nil {
			return nil
		}
		var ae *apiError
		retry := false
		switch {
		case errors.As(err, &ae) && ae.rateLimited():
			retry = true
		case errors.As(err, &ae) && ae.HTTPStatus >= 500, isTransport(err):
			retry = retryWrites
		}
		if !retry || attempt >= a.retries || ctx.Err() != nil {
			return a.classify(path, err)
		}
		if wait <= 0 {
			wait = pause
			pause = min(2*pause, a.maxBackoffGap)
		}
		hclog.Default().Debug("Porkbun call again", "path", path, "attempt", attempt+1, "pause", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return a.classify(path, err)
		case <-t.C:
		}
	}
}

// transportError is a call that got no answer (refused, reset, timed out).
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func isTransport(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

// once makes one request; wait is the Retry-After of a rate-limited answer.
func (a *api) once(ctx context.Context, path string, payload []byte, idempotencyKey string, out any) (wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "fedhost-registrar-porkbun")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	start := time.Now()
	resp, err := a.http.Do(req)
	if err != nil {
		// The error names the URL, never the body with the keys.
		return 0, &transportError{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, &transportError{err}
	}
	hclog.Default().Debug("Porkbun call", "path", path, "http_status", resp.StatusCode, "took", time.Since(start))
	if len(body) > maxBody {
		return 0, fmt.Errorf("Porkbun's answer to %s is over %d bytes", path, maxBody)
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 300 {
			wait = time.Duration(n) * time.Second
		}
	}
	err = parseResponse(resp.StatusCode, body, out)
	var ae *apiError
	if errors.As(err, &ae) {
		ae.Message = a.redact(ae.Message)
	}
	return wait, err
}

// redact removes the key pair from a text of Porkbun's, should it ever quote them.
func (a *api) redact(s string) string {
	for _, v := range []string{a.key, a.secret} {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// classify turns what is left after the retries into the sdk's codes: the host fails a
// step unavailable on a registrar that is down, slow or rate-limiting, and shows the
// others to the operator.
func (a *api) classify(path string, err error) error {
	var ae *apiError
	switch {
	case isTransport(err):
		return sdk.Unavailable("Porkbun (%s) did not answer: %v", endpointName(path), a.redact(err.Error()))
	case errors.As(err, &ae) && ae.rateLimited():
		return sdk.Unavailable("Porkbun's rate limit held %s back through every retry: try again in a minute", endpointName(path))
	case errors.As(err, &ae) && ae.HTTPStatus >= 500:
		return sdk.Unavailable("Porkbun (%s) failed with HTTP %d: try again later", endpointName(path), ae.HTTPStatus)
	case errors.As(err, &ae) && isAuthError(ae):
		return sdk.Invalid("settings/api_key_file", "Porkbun refused the API key pair (%s): check the key files and that API access is on for the account", ae.Message)
	}
	return err
}

func isAuthError(ae *apiError) bool {
	m := strings.ToLower(ae.Message)
	return ae.HTTPStatus == http.StatusUnauthorized || ae.HTTPStatus == http.StatusForbidden ||
		strings.Contains(m, "invalid api key") || strings.Contains(m, "api key")
}

// endpointName is the endpoint without the domain (domain/create), for errors.
func endpointName(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 2 {
		return parts[0] + "/" + parts[1]
	}
	return strings.Join(parts, "/")
}
