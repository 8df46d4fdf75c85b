package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sync"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// directoryConfig is a deployment's directory as its ldap result describes it, with the
// bind password's value.
type directoryConfig struct {
	URL          string `json:"url"`
	UsersDN      string `json:"users_dn"`
	GroupsDN     string `json:"groups_dn"`
	BindDN       string `json:"bind_dn"`
	BindPassword string `json:"bind_password"`
}

// user is what a sign-in learns of a person in the directory.
type user struct {
	// Subject is the entry's entryUUID: a user deleted and made again under the same name
	// is another subject.
	Subject  string   `json:"sub"`
	Name     string   `json:"uid"`
	FullName string   `json:"name,omitempty"`
	Given    string   `json:"given_name,omitempty"`
	Family   string   `json:"family_name,omitempty"`
	Email    string   `json:"email,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// errBadCredentials is every reason a sign-in fails that the person may not learn apart:
// no such user, a wrong password, a disabled account.
var errBadCredentials = errors.New("the user name or the password is wrong")

// userNameRE bounds what the log-in form accepts as a user name before the directory
// sees it: the characters of the users the openldap provider and the operator UI make.
var userNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// directory talks to one deployment's directory: a bind-account connection kept open
// for searches, and a connection of its own for each user's bind.
type directory struct {
	cfg directoryConfig

	mu   sync.Mutex
	conn *ldap.Conn
	// idle are connections kept for users' binds: each bind sets the connection's
	// identity anew, and reusing them spares slapd a connection per sign-in. They never
	// search.
	idle []*ldap.Conn
}

// maxIdleBinds bounds the kept user-bind connections of a directory.
const maxIdleBinds = 8

const ldapTimeout = 10 * time.Second

func (d *directory) dial(ctx context.Context) (*ldap.Conn, error) {
	dialer := &net.Dialer{Timeout: ldapTimeout}
	if dl, ok := ctx.Deadline(); ok {
		dialer.Deadline = dl
	}
	c, err := ldap.DialURL(d.cfg.URL, ldap.DialWithDialer(dialer), ldap.DialWithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	if err != nil {
		return nil, fmt.Errorf("reaching the directory: %w", err)
	}
	c.SetTimeout(ldapTimeout)
	return c, nil
}

// searcher is the bind account's connection, dialled again when it has closed.
func (d *directory) searcher(ctx context.Context) (*ldap.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil && !d.conn.IsClosing() {
		return d.conn, nil
	}
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.Bind(d.cfg.BindDN, d.cfg.BindPassword); err != nil {
		c.Close()
		return nil, fmt.Errorf("binding as the deployment's bind account: %w", err)
	}
	d.conn = c
	return c, nil
}

func (d *directory) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
	for _, c := range d.idle {
		c.Close()
	}
	d.idle = nil
}

// binder is a connection for a user's bind: a kept one, or a new one.
func (d *directory) binder(ctx context.Context) (*ldap.Conn, error) {
	d.mu.Lock()
	for len(d.idle) > 0 {
		c := d.idle[len(d.idle)-1]
		d.idle = d.idle[:len(d.idle)-1]
		if !c.IsClosing() {
			d.mu.Unlock()
			return c, nil
		}
		c.Close()
	}
	d.mu.Unlock()
	return d.dial(ctx)
}

// release keeps c for the next user's bind, or closes it when enough are kept.
func (d *directory) release(c *ldap.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.IsClosing() || len(d.idle) >= maxIdleBinds {
		c.Close()
		return
	}
	d.idle = append(d.idle, c)
}

// lockedAttr is set by the ppolicy overlay on a disabled account.
const lockedAttr = "pwdAccountLockedTime"

// find searches uid=name under users_dn and returns its DN and user, or errBadCredentials.
func (d *directory) find(ctx context.Context, name string) (string, user, error) {
	if !userNameRE.MatchString(name) {
		return "", user{}, errBadCredentials
	}
	c, err := d.searcher(ctx)
	if err != nil {
		return "", user{}, err
	}
	req := ldap.NewSearchRequest(d.cfg.UsersDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 2, int(ldapTimeout/time.Second), false,
		"(&(objectClass=inetOrgPerson)(uid="+ldap.EscapeFilter(name)+"))",
		[]string{"uid", "cn", "displayName", "givenName", "sn", "mail", "entryUUID", lockedAttr}, nil)
	res, err := c.Search(req)
	if err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			return "", user{}, errBadCredentials
		}
		d.dropIfClosed(c)
		return "", user{}, fmt.Errorf("searching the users: %w", err)
	}
	if len(res.Entries) != 1 {
		return "", user{}, errBadCredentials
	}
	e := res.Entries[0]
	if e.GetAttributeValue(lockedAttr) != "" {
		return "", user{}, errBadCredentials
	}
	u := user{
		Subject:  e.GetAttributeValue("entryUUID"),
		Name:     e.GetAttributeValue("uid"),
		FullName: e.GetAttributeValue("displayName"),
		Given:    e.GetAttributeValue("givenName"),
		Family:   e.GetAttributeValue("sn"),
		Email:    e.GetAttributeValue("mail"),
	}
	if u.FullName == "" {
		u.FullName = e.GetAttributeValue("cn")
	}
	if u.Subject == "" {
		u.Subject = u.Name
	}
	groups, err := d.groupsOf(c, e.DN)
	if err != nil {
		d.dropIfClosed(c)
		return "", user{}, err
	}
	u.Groups = groups
	return e.DN, u, nil
}

// groupsOf is the cn of each groupOfNames under groups_dn that has dn as a member.
func (d *directory) groupsOf(c *ldap.Conn, dn string) ([]string, error) {
	req := ldap.NewSearchRequest(d.cfg.GroupsDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 1000, int(ldapTimeout/time.Second), false,
		"(&(objectClass=groupOfNames)(member="+ldap.EscapeFilter(dn)+"))", []string{"cn"}, nil)
	res, err := c.Search(req)
	if err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			return nil, nil
		}
		return nil, fmt.Errorf("searching the groups: %w", err)
	}
	groups := make([]string, 0, len(res.Entries))
	for _, e := range res.Entries {
		if cn := e.GetAttributeValue("cn"); cn != "" {
			groups = append(groups, cn)
		}
	}
	return groups, nil
}

func (d *directory) dropIfClosed(c *ldap.Conn) {
	if c.IsClosing() {
		d.mu.Lock()
		if d.conn == c {
			d.conn = nil
		}
		d.mu.Unlock()
	}
}

// authenticate finds the user and binds as them with password on a connection of its
// own, so the bind account's connection never changes identity.
func (d *directory) authenticate(ctx context.Context, name, password string) (user, error) {
	if password == "" || len(password) > 1024 {
		return user{}, errBadCredentials
	}
	dn, u, err := d.find(ctx, name)
	if err != nil {
		return user{}, err
	}
	c, err := d.binder(ctx)
	if err != nil {
		return user{}, err
	}
	if err := c.Bind(dn, password); err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			d.release(c)
			return user{}, errBadCredentials
		}
		c.Close()
		return user{}, fmt.Errorf("binding as the user: %w", err)
	}
	d.release(c)
	return u, nil
}
