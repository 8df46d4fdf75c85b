package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/slapd"
	"github.com/fedhost/fedhost/sdk"
)

// The managed slapd lives in <data dir>/slapd:
//
//	admin.password  the root DN's password, 0600
//	port            the TCP port chosen at the first start, on 127.0.0.1
//	slapd.d/        its cn=config (internal/slapd), with the tenant-isolation rules
//	data/           the mdb database
//	slapd.log       its output
const (
	managedBase      = "dc=fedhost,dc=internal"
	managedAdmin     = "cn=admin," + managedBase
	managedPassword  = "admin.password"
	managedPort      = "port"
	managedStartWait = 30 * time.Second
)

// managedDirectory starts (or keeps) the managed slapd and returns the directory on it.
func (p *provider) managedDirectory(s settings) (*directory, error) {
	for _, f := range []struct {
		name string
		set  bool
	}{{"url", s.URL != ""}, {"base_dn", s.BaseDN != ""}, {"admin_dn", s.AdminDN != ""}, {"admin_password_file", s.AdminPasswordFile != ""}} {
		if f.set {
			return nil, sdk.Invalid("settings/"+f.name, "the managed slapd has its own: %s is for a shared server (without managed)", f.name)
		}
	}
	if sdk.DataDir() == "" {
		return nil, sdk.Invalid("settings/managed", "the managed slapd lives in the plugin's data dir, and the host gave none (%s): set url to use a shared server instead", sdk.DataDirEnv)
	}
	dir := filepath.Join(sdk.DataDir(), "slapd")
	password, err := p.ensureManaged(dir)
	if err != nil {
		return nil, err
	}
	public := p.proc.URL
	if s.PublicURL != "" {
		if !validURL(s.PublicURL) {
			return nil, sdk.Invalid("settings/public_url", urlHelp)
		}
		public = s.PublicURL
	}
	return &directory{url: p.proc.URL, publicURL: public, base: managedBase, adminDN: managedAdmin, adminPassword: password}, nil
}

// ensureManaged sets the slapd in dir up on first use and starts it unless it runs. The
// caller holds p.mu.
func (p *provider) ensureManaged(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", sdk.Invalid("settings/managed", "making the managed slapd's directory: %v", err)
	}
	d := slapd.Dir(dir)
	passwordPath := filepath.Join(dir, managedPassword)
	password, err := readSecretFile(passwordPath)
	switch {
	case errors.Is(err, os.ErrNotExist) && d.Initialised():
		return "", sdk.Unavailable("%s is gone but the managed slapd is set up: put the root DN's password back, or remove %s to start an empty directory", passwordPath, dir)
	case errors.Is(err, os.ErrNotExist):
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		password = hex.EncodeToString(b)
		if err := os.WriteFile(passwordPath, []byte(password+"\n"), 0o600); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	}
	if p.proc != nil && p.procDir == dir && p.proc.Running() {
		return password, nil
	}
	log := hclog.Default()
	if !d.Initialised() {
		log.Info("setting up the managed slapd", "dir", dir, "base_dn", managedBase)
		if err := d.Init(managedBase, managedAdmin, password); err != nil {
			return "", sdk.Unavailable("setting up the managed slapd in %s: %v", dir, err)
		}
	}
	port := 0
	if b, err := os.ReadFile(filepath.Join(dir, managedPort)); err == nil {
		if port, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || port < 1 || port > 65535 {
			return "", sdk.Unavailable("%s does not hold a port number: remove it to have a new port chosen", filepath.Join(dir, managedPort))
		}
	}
	// The first start chooses a free port, which another process may take first; a
	// later start keeps its port, which a slapd of the previous run may hold a moment.
	firstStart := port == 0
	var proc *slapd.Process
	for attempt := 1; ; attempt++ {
		if firstStart {
			if port, err = child.FreePort(); err != nil {
				return "", err
			}
		}
		proc, err = d.Start(port, managedAdmin, password, managedStartWait)
		if err == nil || !errors.Is(err, slapd.ErrExited) || attempt == 3 {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return "", sdk.Unavailable("starting the managed slapd: %v", err)
	}
	if firstStart {
		if err := os.WriteFile(filepath.Join(dir, managedPort), fmt.Appendf(nil, "%d\n", port), 0o600); err != nil {
			proc.Stop()
			return "", err
		}
	}
	if p.proc != nil {
		p.proc.Stop()
	}
	p.proc, p.procDir = proc, dir
	log.Info("managed slapd started", "dir", dir, "url", proc.URL)
	return password, nil
}

func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", sdk.Unavailable("%s is empty: put the managed slapd's root DN password back", path)
	}
	return pw, nil
}

// close stops the managed slapd, if one runs.
func (p *provider) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		p.proc.Stop()
		p.proc = nil
	}
}
