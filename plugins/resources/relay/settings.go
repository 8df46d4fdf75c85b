package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/plugins/resources/internal/hostname"
	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "listen": {"type": "string", "minLength": 1, "maxLength": 300, "description": "host:port the relay's submission listener binds (0.0.0.0:587, 127.0.0.1:2525)"},
    "host": {"type": "string", "minLength": 1, "maxLength": 253, "description": "Name or address apps connect to, given in every result; default the host of listen"},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Port apps connect to, given in every result; default the port of listen"},
    "tls": {"enum": ["none", "starttls", "tls"], "description": "How apps reach the listener: starttls (submission, port 587), tls (implicit TLS, port 465) or none (only on a loopback listen address); default starttls"},
    "cert_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "PEM certificate chain of the listener for starttls and tls, read again when it changes"},
    "key_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "PEM private key of cert_file"},
    "domains": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 253}, "maxItems": 1000, "description": "Domains (with the names under them) a From address may be on; default any domain, each held by the first deployment that asks"},
    "max_message_bytes": {"type": "integer", "minimum": 1024, "maximum": 104857600, "description": "Largest message taken; default 10485760 (10 MiB)"},
    "max_recipients": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Most recipients of one message; default 100"},
    "upstream": {
      "type": "object",
      "description": "The hosting provider's outgoing mail server every accepted message is handed to",
      "properties": {
        "host": {"type": "string", "minLength": 1, "maxLength": 253, "description": "Name or address of the upstream server"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Its port; default 587 (465 for tls, 25 for none)"},
        "tls": {"enum": ["none", "starttls", "tls"], "description": "How the relay reaches it; default starttls"},
        "ca_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "PEM CA certificates its certificate is checked against; default the system's"},
        "user": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Account the relay authenticates with (AUTH PLAIN); default none"},
        "password_file": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File holding that account's password (one line)"},
        "helo": {"type": "string", "minLength": 1, "maxLength": 253, "description": "Name the relay gives in EHLO; default the host setting"}
      },
      "required": ["host"],
      "additionalProperties": false
    }
  },
  "required": ["listen", "upstream"],
  "additionalProperties": false
}`)

type settings struct {
	Listen          string   `json:"listen"`
	Host            string   `json:"host,omitempty"`
	Port            int      `json:"port,omitempty"`
	TLS             string   `json:"tls,omitempty"`
	CertFile        string   `json:"cert_file,omitempty"`
	KeyFile         string   `json:"key_file,omitempty"`
	Domains         []string `json:"domains,omitempty"`
	MaxMessageBytes int64    `json:"max_message_bytes,omitempty"`
	MaxRecipients   int      `json:"max_recipients,omitempty"`
	Upstream        upstream `json:"upstream"`
}

type upstream struct {
	Host         string `json:"host"`
	Port         int    `json:"port,omitempty"`
	TLS          string `json:"tls,omitempty"`
	CAFile       string `json:"ca_file,omitempty"`
	User         string `json:"user,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
	HELO         string `json:"helo,omitempty"`
}

// config is the settings checked, with defaults filled in and files read.
type config struct {
	settings
	listenLoopback bool
	// upstreamPassword is read from upstream.password_file; never logged.
	upstreamPassword string
	upstreamRoots    *x509.CertPool
}

// maxPasswordFile bounds the upstream password file.
const maxPasswordFile = 4096

// parseSettings checks the settings and fills in their defaults. An error names the
// setting and never repeats a value.
func parseSettings(raw json.RawMessage) (*config, error) {
	var s settings
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, sdk.Invalid("settings", "the settings are not an object of the relay's settings: %v", err)
	}
	c := &config{settings: s}
	host, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return nil, sdk.Invalid("settings/listen", "listen is not host:port (127.0.0.1:2525)")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return nil, sdk.Invalid("settings/listen", "the port of listen is not a number from 1 to 65535")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		c.listenLoopback = a.IsLoopback()
	} else {
		c.listenLoopback = host == "localhost"
	}
	if c.Host == "" {
		if host == "" || host == "0.0.0.0" || host == "::" {
			return nil, sdk.Invalid("settings/host", "listen binds every address, so set host: the name apps connect to")
		}
		c.Host = host
	}
	if c.Port == 0 {
		c.Port = p
	}
	if c.TLS == "" {
		c.TLS = "starttls"
	}
	switch c.TLS {
	case "none":
		if !c.listenLoopback {
			return nil, sdk.Invalid("settings/tls", "tls none sends the accounts' passwords in the clear: it is allowed only on a loopback listen address; set tls to starttls with cert_file and key_file")
		}
	case "starttls", "tls":
		if c.CertFile == "" || c.KeyFile == "" {
			return nil, sdk.Invalid("settings/cert_file", "tls %s needs cert_file and key_file, the listener's certificate and key", c.TLS)
		}
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			return nil, sdk.Invalid("settings/cert_file", "cert_file and key_file are not a PEM certificate and its key the plugin can read: %v", err)
		}
	default:
		return nil, sdk.Invalid("settings/tls", "tls is none, starttls or tls")
	}
	for i, d := range c.Domains {
		d = strings.TrimSuffix(d, ".")
		if err := checkDomain(d); err != nil {
			return nil, sdk.Invalid(fmt.Sprintf("settings/domains/%d", i), "%v", err)
		}
		c.Domains[i] = d
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 10 << 20
	}
	if c.MaxRecipients == 0 {
		c.MaxRecipients = 100
	}
	if err := c.parseUpstream(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *config) parseUpstream() error {
	u := &c.Upstream
	if u.Host == "" {
		return sdk.Invalid("settings/upstream/host", "upstream.host is needed: the server the relay hands messages to")
	}
	if u.TLS == "" {
		u.TLS = "starttls"
	}
	if u.Port == 0 {
		u.Port = map[string]int{"none": 25, "starttls": 587, "tls": 465}[u.TLS]
	}
	if u.Port == 0 {
		return sdk.Invalid("settings/upstream/tls", "upstream.tls is none, starttls or tls")
	}
	if u.HELO == "" {
		u.HELO = c.Host
	}
	if u.CAFile != "" {
		pem, err := os.ReadFile(u.CAFile)
		if err != nil {
			return sdk.Invalid("settings/upstream/ca_file", "upstream.ca_file cannot be read: %v", err)
		}
		c.upstreamRoots = x509.NewCertPool()
		if !c.upstreamRoots.AppendCertsFromPEM(pem) {
			return sdk.Invalid("settings/upstream/ca_file", "upstream.ca_file holds no PEM certificate")
		}
	}
	if (u.User == "") != (u.PasswordFile == "") {
		return sdk.Invalid("settings/upstream/password_file", "set upstream.user and upstream.password_file together, or neither")
	}
	if u.PasswordFile != "" {
		f, err := os.Open(u.PasswordFile)
		if err != nil {
			return sdk.Invalid("settings/upstream/password_file", "upstream.password_file cannot be read: %v", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
		if err != nil {
			return sdk.Invalid("settings/upstream/password_file", "upstream.password_file cannot be read: %v", err)
		}
		if len(b) > maxPasswordFile {
			return sdk.Invalid("settings/upstream/password_file", "upstream.password_file is longer than %d bytes: it holds one password", maxPasswordFile)
		}
		c.upstreamPassword = strings.TrimRight(string(b), "\r\n")
		if c.upstreamPassword == "" || strings.ContainsAny(c.upstreamPassword, "\r\n\x00") {
			return sdk.Invalid("settings/upstream/password_file", "upstream.password_file holds no password, or more than one line")
		}
	}
	return nil
}

// checkDomain says why d is not a domain a From address may be on. It never repeats d.
func checkDomain(d string) error {
	if strings.HasPrefix(d, "*") {
		return fmt.Errorf("a domain of mail addresses, not a wildcard")
	}
	if !strings.Contains(d, ".") && d != "localhost" {
		return fmt.Errorf("a mail domain has at least two labels (acme.example)")
	}
	return hostname.Check(d)
}

// allowed reports whether the settings let a From address be on domain d.
func (c *config) allowed(d string) bool {
	if len(c.Domains) == 0 {
		return true
	}
	for _, a := range c.Domains {
		if d == a || strings.HasSuffix(d, "."+a) {
			return true
		}
	}
	return false
}
