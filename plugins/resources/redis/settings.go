package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "address": {"type": "string", "minLength": 1, "description": "host:port of the shared Redis server"},
    "username": {"type": "string", "minLength": 1, "description": "Admin user allowed to run ACL, CONFIG GET, SCAN and UNLINK; default \"default\""},
    "password": {"type": "string", "minLength": 1, "description": "Password of the admin user"},
    "password_file": {"type": "string", "minLength": 1, "description": "File holding the admin password, instead of password"},
    "host": {"type": "string", "minLength": 1, "description": "Host handed to applications, if not the address's"},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Port handed to applications, if not the address's"},
    "tls": {"type": "boolean", "description": "Talk TLS to the server (the plugin verifies its certificate)"}
  },
  "required": ["address"],
  "additionalProperties": false
}`)

type settings struct {
	Address      string `json:"address"`
	Username     string `json:"username"`
	Password     string `json:"password"`
	PasswordFile string `json:"password_file"`
	Host         string `json:"host"`
	Port         int    `json:"port"`
	TLS          bool   `json:"tls"`
}

// Configure takes the settings and opens a client on the server. It does not reach the
// server: a server that is down now is reported by the first call that needs it.
func (p *provider) Configure(_ context.Context, raw json.RawMessage) error {
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return sdk.Invalid("settings", "settings are not an object: %v", err)
	}
	srv, err := s.server()
	if err != nil {
		return err
	}
	p.swap(srv)
	hclog.Default().Info("using a shared Redis server", "address", s.Address, "username", srv.username, "tls", s.TLS)
	return nil
}

// server checks the settings and builds the admin client they describe.
func (s settings) server() (*server, error) {
	host, portText, err := net.SplitHostPort(s.Address)
	if err != nil || host == "" {
		return nil, sdk.Invalid("settings/address", "%q is not host:port (redis.example.net:6379, say)", s.Address)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return nil, sdk.Invalid("settings/address", "the port of %q is not a number from 1 to 65535", s.Address)
	}
	password, err := s.adminPassword()
	if err != nil {
		return nil, err
	}
	username := s.Username
	if username == "" {
		username = "default"
	}
	if s.Host != "" {
		host = s.Host
	}
	if s.Port != 0 {
		port = s.Port
	}
	var tlsConfig *tls.Config
	if s.TLS {
		serverName, _, _ := net.SplitHostPort(s.Address)
		tlsConfig = &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	}
	return newServer(s.Address, username, password, tlsConfig, host, port), nil
}

// adminPassword returns password, or the content of password_file.
func (s settings) adminPassword() (string, error) {
	switch {
	case s.Password != "" && s.PasswordFile != "":
		return "", sdk.Invalid("settings/password_file", "set password or password_file, not both")
	case s.Password != "":
		return s.Password, nil
	case s.PasswordFile == "":
		return "", sdk.Invalid("settings/password", "the admin user needs a password: set password or password_file")
	}
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		return "", sdk.Invalid("settings/password_file", "reading the admin password: %v", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", sdk.Invalid("settings/password_file", "%s is empty: write the admin password into it", s.PasswordFile)
	}
	return pw, nil
}
