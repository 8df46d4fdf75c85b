// Package ldaptest starts a real OpenLDAP slapd on loopback for tests, from a temporary
// cn=config made by internal/slapd: one mdb database, a root DN with a password, and the
// static tenant-isolation rules of the openldap ldap provider (slapd.TenantACL).
package ldaptest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/slapd"
)

// Server is a running slapd.
type Server struct {
	// URL is ldap://127.0.0.1:port/.
	URL string
	// BaseDN is the suffix of its database; its entry exists.
	BaseDN string
	// AdminDN and AdminPassword are the database's root DN, which no rule limits.
	AdminDN, AdminPassword string
	// AdminPasswordFile holds AdminPassword, as the provider's admin_password_file reads it.
	AdminPasswordFile string
	// Dir holds its cn=config, its database and its log.
	Dir string
}

// BaseDN is the suffix Start serves.
const BaseDN = "dc=fedhost,dc=test"

// Start sets up a slapd in dir on a free port of 127.0.0.1, runs it in the foreground as
// a child that ends with the test process, and waits until the root DN can bind.
func Start(dir string) (*Server, func(), error) {
	port, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	s := &Server{
		BaseDN:            BaseDN,
		AdminDN:           "cn=admin," + BaseDN,
		AdminPassword:     hex.EncodeToString(b),
		AdminPasswordFile: filepath.Join(dir, "admin-password"),
		Dir:               dir,
	}
	if err := os.WriteFile(s.AdminPasswordFile, []byte(s.AdminPassword+"\n"), 0o600); err != nil {
		return nil, nil, err
	}
	d := slapd.Dir(dir)
	if err := d.Init(s.BaseDN, s.AdminDN, s.AdminPassword); err != nil {
		return nil, nil, err
	}
	p, err := d.Start(port, s.AdminDN, s.AdminPassword, 20*time.Second)
	if err != nil {
		return nil, nil, err
	}
	s.URL = p.URL
	return s, p.Stop, nil
}

// Admin is a connection bound as the root DN; the caller closes it.
func (s *Server) Admin() (*ldap.Conn, error) {
	c, err := ldap.DialURL(s.URL)
	if err != nil {
		return nil, err
	}
	if err := c.Bind(s.AdminDN, s.AdminPassword); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Log is the end of slapd's log, for a failing test's message.
func (s *Server) Log() string { return strings.TrimSpace(child.Tail(slapd.Dir(s.Dir).LogPath(), 20)) }
