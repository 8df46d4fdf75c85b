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
    "base_url": {"type": "string", "minLength": 1, "maxLength": 300, "description": "The API's v1beta root; default https://api.openprovider.eu/v1beta/"},
    "username_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File holding the Openprovider user name"},
    "password_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File holding the Openprovider password"},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 300, "description": "How long one API call may take; default 30"},
    "token_minutes": {"type": "integer", "minimum": 1, "maximum": 2880, "description": "How long a bearer token is used before the driver logs in again; default 720 (the API also answers 401 for an expired one, which logs in again)"},
    "pending_wait_seconds": {"type": "integer", "minimum": 0, "maximum": 3600, "description": "How long a call follows a requested or pending domain before it returns it as pending; default 300"},
    "poll_milliseconds": {"type": "integer", "minimum": 10, "maximum": 600000, "description": "How often a pending domain is read again; default 10000"}
  },
  "required": ["username_file", "password_file"],
  "additionalProperties": false
}`)

type settings struct {
	BaseURL            string `json:"base_url"`
	UsernameFile       string `json:"username_file"`
	PasswordFile       string `json:"password_file"`
	TimeoutSeconds     int    `json:"timeout_seconds"`
	TokenMinutes       int    `json:"token_minutes"`
	PendingWaitSeconds *int   `json:"pending_wait_seconds"`
	PollMilliseconds   int    `json:"poll_milliseconds"`
}

// config is the checked settings, with the credentials read.
type config struct {
	base        string // ends in a slash
	user, pass  string
	timeout     time.Duration
	tokenTTL    time.Duration
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
	c := &config{base: "https://api.openprovider.eu/v1beta/", timeout: 30 * time.Second, tokenTTL: 720 * time.Minute,
		pendingWait: 300 * time.Second, poll: 10 * time.Second}
	if s.BaseURL != "" {
		u, err := url.Parse(s.BaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			return nil, sdk.Invalid("settings/base_url", "give an http(s) URL without credentials or query (https://api.openprovider.eu/v1beta/)")
		}
		c.base = strings.TrimSuffix(u.String(), "/") + "/"
	}
	var err error
	if c.user, err = readSecret("settings/username_file", s.UsernameFile); err != nil {
		return nil, err
	}
	if c.pass, err = readSecret("settings/password_file", s.PasswordFile); err != nil {
		return nil, err
	}
	if s.TimeoutSeconds != 0 {
		c.timeout = time.Duration(s.TimeoutSeconds) * time.Second
	}
	if s.TokenMinutes != 0 {
		c.tokenTTL = time.Duration(s.TokenMinutes) * time.Minute
	}
	if s.PendingWaitSeconds != nil {
		c.pendingWait = time.Duration(*s.PendingWaitSeconds) * time.Second
	}
	if s.PollMilliseconds != 0 {
		c.poll = time.Duration(s.PollMilliseconds) * time.Millisecond
	}
	return c, nil
}

// Configure reads the settings and the credential files; it does not reach Openprovider,
// so a registrar that is down now does not stop the plugin from starting.
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
	d.api = newAPI(c)
	return nil
}
