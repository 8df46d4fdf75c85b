package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "base_url": {"type": "string", "minLength": 1, "maxLength": 300, "description": "The DomRobot JSON-RPC endpoint; default https://api.domrobot.com/jsonrpc/ (OT&E: https://api.ote.domrobot.com/jsonrpc/)"},
    "username_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File holding the INWX account name"},
    "password_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File holding the INWX account password"},
    "currency": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "Currency of the account, in which domain.check quotes prices; default EUR"},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 300, "description": "How long one API call may take; default 30"},
    "pending_wait_seconds": {"type": "integer", "minimum": 0, "maximum": 3600, "description": "How long a call follows a pending (1001) answer before it returns the domain as pending; default 300"},
    "poll_milliseconds": {"type": "integer", "minimum": 10, "maximum": 600000, "description": "How often a pending domain is read again; default 10000"}
  },
  "required": ["username_file", "password_file"],
  "additionalProperties": false
}`)

type settings struct {
	BaseURL            string `json:"base_url"`
	UsernameFile       string `json:"username_file"`
	PasswordFile       string `json:"password_file"`
	Currency           string `json:"currency"`
	TimeoutSeconds     int    `json:"timeout_seconds"`
	PendingWaitSeconds *int   `json:"pending_wait_seconds"`
	PollMilliseconds   int    `json:"poll_milliseconds"`
}

// config is the checked settings, with the credentials read.
type config struct {
	url         string
	user, pass  string
	currency    string
	timeout     time.Duration
	pendingWait time.Duration
	poll        time.Duration
}

// readSecret reads one credential file: one line, at most 1 KiB.
func readSecret(field, path string) (string, error) {
	if path == "" {
		return "", sdk.Invalid(field, "give the path of the file holding it")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", sdk.Invalid(field, "the file cannot be read (%v): create it, readable by the plugin", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" || len(s) > 1024 || strings.ContainsAny(s, "\r\n") {
		return "", sdk.Invalid(field, "the file must hold one line of 1 to 1024 characters")
	}
	return s, nil
}

func (s settings) config() (*config, error) {
	c := &config{url: "https://api.domrobot.com/jsonrpc/", currency: "EUR", timeout: 30 * time.Second,
		pendingWait: 300 * time.Second, poll: 10 * time.Second}
	if s.BaseURL != "" {
		u, err := url.Parse(s.BaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return nil, sdk.Invalid("settings/base_url", "give an http(s) URL without credentials (https://api.domrobot.com/jsonrpc/)")
		}
		c.url = u.String()
	}
	var err error
	if c.user, err = readSecret("settings/username_file", s.UsernameFile); err != nil {
		return nil, err
	}
	if c.pass, err = readSecret("settings/password_file", s.PasswordFile); err != nil {
		return nil, err
	}
	if s.Currency != "" {
		c.currency = s.Currency
	}
	if s.TimeoutSeconds != 0 {
		c.timeout = time.Duration(s.TimeoutSeconds) * time.Second
	}
	if s.PendingWaitSeconds != nil {
		c.pendingWait = time.Duration(*s.PendingWaitSeconds) * time.Second
	}
	if s.PollMilliseconds != 0 {
		c.poll = time.Duration(s.PollMilliseconds) * time.Millisecond
	}
	return c, nil
}

// Configure reads the settings and the credential files; it does not reach INWX, so a
// registrar that is down now does not stop the plugin from starting.
func (d *driver) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return sdk.Invalid("settings", "settings are not an object of the settings schema: %v", err)
	}
	c, err := s.config()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg = c
	d.rpc = newDomrobot(c)
	return nil
}
