package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fedhost/fedhost/sdk"
)

type settings struct {
	URL               string   `json:"url"`
	ClientCertFile    string   `json:"client_cert_file"`
	ClientKeyFile     string   `json:"client_key_file"`
	ServerCertFile    string   `json:"server_cert_file"`
	CAFile            string   `json:"ca_file"`
	Project           string   `json:"project"`
	Profiles          []string `json:"profiles"`
	StoragePool       string   `json:"storage_pool"`
	Network           string   `json:"network"`
	ListenHost        string   `json:"listen_host"`
	NodeDir           string   `json:"node_dir"`
	SystemImageServer string   `json:"system_image_server"`
	OperationTimeout  int      `json:"operation_timeout_seconds"`
	PortRange         string   `json:"port_range"`

	host              string // host:port of url, for errors
	PortLow, PortHigh int    `json:"-"` // of port_range
}

// incusName is a project, profile, pool or network name as Incus takes them.
var incusName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func parseSettings(raw json.RawMessage) (settings, *apiClient, error) {
	var s settings
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return s, nil, sdk.Invalid("settings", "settings are not an object of the settings schema: %v", err)
		}
	}
	u, err := url.Parse(s.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || len(s.URL) > 512 {
		return s, nil, sdk.Invalid("settings/url", "url is the Incus server's https://host:port (its core.https_address), without a path")
	}
	s.host = u.Host
	if u.Port() == "" {
		s.host = net.JoinHostPort(u.Hostname(), "8443")
	}
	if s.ClientCertFile == "" || s.ClientKeyFile == "" {
		return s, nil, sdk.Invalid("settings/client_cert_file", "give client_cert_file and client_key_file: the PEM certificate the server trusts (incus config trust add-certificate) and its key")
	}
	cert, err := tls.LoadX509KeyPair(s.ClientCertFile, s.ClientKeyFile)
	if err != nil {
		// The error of the parser could quote the files; only what to do is shown.
		return s, nil, sdk.Invalid("settings/client_cert_file", "client_cert_file and client_key_file are not a readable PEM certificate and its matching unencrypted key")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	switch {
	case s.ServerCertFile != "" && s.CAFile != "":
		return s, nil, sdk.Invalid("settings/server_cert_file", "give server_cert_file (the server's own certificate, pinned) or ca_file, not both")
	case s.ServerCertFile != "":
		der, err := readPEMCert(s.ServerCertFile)
		if err != nil {
			return s, nil, sdk.Invalid("settings/server_cert_file", "server_cert_file: %v", err)
		}
		tc.InsecureSkipVerify = true // replaced by the pin below, which is stricter
		tc.VerifyConnection = pinned(fingerprint(der), s.host)
	case s.CAFile != "":
		b, err := os.ReadFile(s.CAFile)
		if err != nil {
			return s, nil, sdk.Invalid("settings/ca_file", "ca_file cannot be read: %v", errors.Unwrap(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return s, nil, sdk.Invalid("settings/ca_file", "ca_file holds no PEM certificate")
		}
		tc.RootCAs = pool
	default:
		return s, nil, sdk.Invalid("settings/server_cert_file", "give server_cert_file (the server's certificate, /var/lib/incus/server.crt, pinned) or ca_file (the CA that signed it)")
	}
	if s.Project == "" {
		s.Project = "default"
	}
	if !incusName.MatchString(s.Project) {
		return s, nil, sdk.Invalid("settings/project", "project is the name of an Incus project")
	}
	if s.Profiles == nil {
		s.Profiles = []string{"default"}
	}
	if len(s.Profiles) > 16 {
		return s, nil, sdk.Invalid("settings/profiles", "at most 16 profiles")
	}
	for i, p := range s.Profiles {
		if !incusName.MatchString(p) {
			return s, nil, sdk.Invalid(fmt.Sprintf("settings/profiles/%d", i), "a profile is the name of an Incus profile")
		}
	}
	if s.StoragePool == "" {
		s.StoragePool = "default"
	}
	if !incusName.MatchString(s.StoragePool) {
		return s, nil, sdk.Invalid("settings/storage_pool", "storage_pool is the name of an Incus storage pool")
	}
	if s.Network != "" && !incusName.MatchString(s.Network) {
		return s, nil, sdk.Invalid("settings/network", "network is the name of an Incus network, or empty to take the profiles' network")
	}
	if net.ParseIP(s.ListenHost) == nil {
		return s, nil, sdk.Invalid("settings/listen_host", "listen_host is the IP address of the Incus machine that nodes' ports listen on (proxy devices) and the host reaches them at")
	}
	if s.NodeDir == "" {
		s.NodeDir = "/srv/fedhost"
	}
	if !path.IsAbs(s.NodeDir) || path.Clean(s.NodeDir) == "/" || len(s.NodeDir) > 256 || !plainPath.MatchString(s.NodeDir) {
		return s, nil, sdk.Invalid("settings/node_dir", "node_dir is an absolute directory in the instance, not /, of letters, digits, '.', '_', '-' and '/'")
	}
	s.NodeDir = path.Clean(s.NodeDir)
	if s.SystemImageServer == "" {
		s.SystemImageServer = "https://images.linuxcontainers.org"
	}
	if su, err := url.Parse(s.SystemImageServer); err != nil || su.Scheme != "https" || su.Host == "" || len(s.SystemImageServer) > 512 {
		return s, nil, sdk.Invalid("settings/system_image_server", "system_image_server is the https URL of a simplestreams image server")
	}
	if s.PortRange == "" {
		s.PortRange = "20000-29999"
	}
	lo, hi, ok := strings.Cut(s.PortRange, "-")
	s.PortLow, _ = strconv.Atoi(lo)
	s.PortHigh, _ = strconv.Atoi(hi)
	if !ok || s.PortLow < 1024 || s.PortHigh > 65535 || s.PortLow > s.PortHigh {
		return s, nil, sdk.Invalid("settings/port_range", "port_range is FROM-TO, the ports of the Incus machine nodes' proxy devices listen on, within 1024-65535")
	}
	if s.OperationTimeout == 0 {
		s.OperationTimeout = 600
	}
	if s.OperationTimeout < 5 || s.OperationTimeout > 3600 {
		return s, nil, sdk.Invalid("settings/operation_timeout_seconds", "operation_timeout_seconds is 5 to 3600")
	}
	c := &apiClient{
		base:      "https://" + u.Host,
		project:   s.Project,
		opTimeout: time.Duration(s.OperationTimeout) * time.Second,
		http: &http.Client{Transport: &http.Transport{
			TLSClientConfig:     tc,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}},
	}
	return s, c, nil
}

var plainPath = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

func readPEMCert(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", errors.Unwrap(err))
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("holds no PEM certificate")
	}
	if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
		return nil, errors.New("holds a PEM block that is not an X.509 certificate")
	}
	return blk.Bytes, nil
}

// pinError is a server certificate that is not the pinned one.
type pinError struct {
	host, got, want string
}

func (e *pinError) Error() string {
	return fmt.Sprintf("the Incus server at %s presented certificate SHA256:%s, which is not the pinned server_cert_file SHA256:%s: "+
		"the driver does not talk to it. If the server's certificate was changed on purpose, check the new one on the server "+
		"(incus info | grep certificate_fingerprint) and put it in settings server_cert_file; otherwise something else answers at that address",
		e.host, e.got, e.want)
}

// pinned accepts only the server certificate of fingerprint want.
func pinned(want, host string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return &pinError{host: host, got: "(none)", want: want}
		}
		if got := fingerprint(cs.PeerCertificates[0].Raw); got != want {
			return &pinError{host: host, got: got, want: want}
		}
		return nil
	}
}
