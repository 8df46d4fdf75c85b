package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
)

// defaultBase is Porkbun's API v3.
const defaultBase = "https://api.porkbun.com/api/json/v3"

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "api_key_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Absolute path of a file holding the account's API key (pk1_...)"},
    "secret_api_key_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Absolute path of a file holding the API key's secret (sk1_...)"},
    "base_url": {"type": "string", "minLength": 1, "maxLength": 2048, "description": "Porkbun's API v3 endpoint; default https://api.porkbun.com/api/json/v3 (a test server's, in tests)"},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 300, "description": "How long one call to Porkbun may take; default 30"},
    "retries": {"type": "integer", "minimum": 0, "maximum": 10, "description": "How often a rate-limited call (and a read, or a write with an idempotency key, that failed on a server error) is sent again, after pauses that double from 1 second; default 4"}
  },
  "required": ["api_key_file", "secret_api_key_file"],
  "additionalProperties": false
}`)

type settings struct {
	APIKeyFile       string `json:"api_key_file"`
	SecretAPIKeyFile string `json:"secret_api_key_file"`
	BaseURL          string `json:"base_url"`
	TimeoutSeconds   int    `json:"timeout_seconds"`
	Retries          *int   `json:"retries"`
}

// maxKey bounds a key file: Porkbun's keys are 68 characters.
const maxKey = 512

// Configure reads the key pair from its files and checks the settings. It does not call
// Porkbun: an account that refuses the keys is reported by the first call.
func (d *driver) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return sdk.Invalid("settings", "settings are not an object of the settings schema: %v", err)
	}
	key, err := readKey("settings/api_key_file", s.APIKeyFile)
	if err != nil {
		return err
	}
	secret, err := readKey("settings/secret_api_key_file", s.SecretAPIKeyFile)
	if err != nil {
		return err
	}
	base := defaultBase
	if s.BaseURL != "" {
		u, err := url.Parse(s.BaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.User != nil {
			return sdk.Invalid("settings/base_url", "not an http(s) URL without query or user (https://api.porkbun.com/api/json/v3)")
		}
		base = strings.TrimSuffix(s.BaseURL, "/")
	}
	timeout := 30 * time.Second
	if s.TimeoutSeconds != 0 {
		if s.TimeoutSeconds < 1 || s.TimeoutSeconds > 300 {
			return sdk.Invalid("settings/timeout_seconds", "give from 1 to 300 seconds")
		}
		timeout = time.Duration(s.TimeoutSeconds) * time.Second
	}
	retries := 4
	if s.Retries != nil {
		if *s.Retries < 0 || *s.Retries > 10 {
			return sdk.Invalid("settings/retries", "give from 0 to 10")
		}
		retries = *s.Retries
	}
	a := &api{base: base, key: key, secret: secret, http: &http.Client{Timeout: timeout},
		retries: retries, backoff: time.Second, maxBackoffGap: 30 * time.Second}
	d.mu.Lock()
	d.api = a
	d.mu.Unlock()
	hclog.Default().Info("using Porkbun", "base_url", base, "timeout", timeout, "retries", retries)
	return nil
}

func readKey(field, path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", sdk.Invalid(field, "give the absolute path of the file that holds the key")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", sdk.Invalid(field, "cannot read the key file: %v", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxKey+1))
	if err != nil {
		return "", sdk.Invalid(field, "cannot read the key file: %v", err)
	}
	if len(buf) > maxKey {
		return "", sdk.Invalid(field, "the key file is over %d bytes: it should hold the key alone", maxKey)
	}
	key := strings.TrimSpace(string(buf))
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		return "", sdk.Invalid(field, "the key file should hold one key on one line")
	}
	return key, nil
}
