package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/sdk"
)

// directory is the shared slapd of the settings.
type directory struct {
	url, publicURL string
	base           string
	adminDN        string
	adminPassword  string
}

// subtree names the entries of one deployment (tenant) and one of its ldap instances.
type subtree struct {
	tenant, instance string
	base             string
}

func (d *directory) subtree(tenant, instance string) subtree {
	return subtree{tenant: tenant, instance: instance, base: d.base}
}

// root is ou=<tenant>,<base>. Tenant and instance names are DNS labels, but they are
// escaped all the same so that no name can ever add an RDN.
func (s subtree) root() string   { return "ou=" + ldap.EscapeDN(s.tenant) + "," + s.base }
func (s subtree) users() string  { return "ou=users," + s.root() }
func (s subtree) groups() string { return "ou=groups," + s.root() }

// bindDN is cn=<tenant>-<instance>,ou=<tenant>,<base>: the form the access rule grants
// the subtree to.
func (s subtree) bindDN() string {
	return "cn=" + ldap.EscapeDN(s.tenant+"-"+s.instance) + "," + s.root()
}

func (s subtree) groupDN(name string) string {
	return "cn=" + ldap.EscapeDN(name) + "," + s.groups()
}

// dial connects to the server and binds as bindDN.
func (d *directory) dial(ctx context.Context, bindDN, password string) (*ldap.Conn, error) {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if dl, ok := ctx.Deadline(); ok {
		dialer.Deadline = dl
	}
	c, err := ldap.DialURL(d.url, ldap.DialWithDialer(dialer), ldap.DialWithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	if err != nil {
		return nil, sdk.Unavailable("reaching the directory at %s (settings/url): %v", d.url, err)
	}
	timeout := 30 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	c.SetTimeout(timeout)
	if err := c.Bind(bindDN, password); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (d *directory) admin(ctx context.Context) (*ldap.Conn, error) {
	c, err := d.dial(ctx, d.adminDN, d.adminPassword)
	if err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			return nil, sdk.Unavailable("the directory refused admin_dn's password: check settings/admin_password_file")
		}
		if sdk.CodeOf(err) == sdk.CodeUnavailable {
			return nil, err
		}
		return nil, sdk.Unavailable("binding as settings/admin_dn: %v", err)
	}
	return c, nil
}

// add creates an entry, leaving one that exists as it is. It reports whether it created.
func add(c *ldap.Conn, dn string, attrs map[string][]string) (bool, error) {
	r := ldap.NewAddRequest(dn, nil)
	for _, name := range sortedKeys(attrs) {
		r.Attribute(name, attrs[name])
	}
	err := c.Add(r)
	if ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		return false, nil
	}
	if err != nil {
		return false, ldapError("adding "+dn, err)
	}
	return true, nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ensure makes the subtree, its groups and its bind account, and gives the account
// password unless it already binds with it. It reports whether it changed anything.
func (d *directory) ensure(ctx context.Context, s subtree, groups []string, password string) (bool, error) {
	c, err := d.admin(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	type entry struct {
		dn    string
		attrs map[string][]string
	}
	changed := false
	entries := []entry{
		{s.root(), map[string][]string{"objectClass": {"organizationalUnit"}, "ou": {s.tenant}, "description": {"fedhost deployment " + s.tenant}}},
		{s.users(), map[string][]string{"objectClass": {"organizationalUnit"}, "ou": {"users"}}},
		{s.groups(), map[string][]string{"objectClass": {"organizationalUnit"}, "ou": {"groups"}}},
		{s.bindDN(), map[string][]string{"objectClass": {"person"}, "cn": {s.tenant + "-" + s.instance}, "sn": {"bind account"}, "description": {"fedhost ldap instance " + s.instance}}},
	}
	for _, g := range groups {
		// groupOfNames must have a member: the bind account stands in, and it is no
		// user (it is not under ou=users).
		entries = append(entries, entry{s.groupDN(g), map[string][]string{"objectClass": {"groupOfNames"}, "cn": {g}, "member": {s.bindDN()}}})
	}
	for _, e := range entries {
		created, err := add(c, e.dn, e.attrs)
		if err != nil {
			return false, err
		}
		changed = changed || created
	}
	if d.binds(ctx, s.bindDN(), password) {
		return changed, nil
	}
	// The server hashes the password (olcPasswordHash) when it comes by the Password
	// Modify extended operation (RFC 3062); it never holds it in clear.
	if _, err := c.PasswordModify(ldap.NewPasswordModifyRequest(s.bindDN(), "", password)); err != nil {
		return false, ldapError("setting the password of "+s.bindDN(), err)
	}
	return true, nil
}

// binds reports whether dn binds with password.
func (d *directory) binds(ctx context.Context, dn, password string) bool {
	c, err := d.dial(ctx, dn, password)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// exists reports whether the subtree and the bind account exist.
func (d *directory) exists(ctx context.Context, s subtree) (bool, error) {
	c, err := d.admin(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	for _, dn := range []string{s.root(), s.users(), s.groups(), s.bindDN()} {
		_, err := c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 1, 0, false, "(objectClass=*)", []string{"1.1"}, nil))
		if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			return false, nil
		}
		if err != nil {
			return false, ldapError("reading "+dn, err)
		}
	}
	return true, nil
}

// remove deletes the bind account, then, unless retain, the whole subtree when no other
// instance's bind account is left in it. It reports how many entries it deleted.
func (d *directory) remove(ctx context.Context, s subtree, retain bool) (int, error) {
	c, err := d.admin(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	deleted := 0
	err = c.Del(ldap.NewDelRequest(s.bindDN(), nil))
	switch {
	case err == nil:
		deleted++
	case ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject):
	default:
		return 0, ldapError("deleting "+s.bindDN(), err)
	}
	if retain {
		return deleted, nil
	}
	res, err := c.SearchWithPaging(ldap.NewSearchRequest(s.root(), ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{"objectClass"}, nil), 500)
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return deleted, nil
	}
	if err != nil {
		return deleted, ldapError("listing "+s.root(), err)
	}
	var dns []string
	for _, e := range res.Entries {
		if e.GetAttributeValue("objectClass") == "person" && isBindAccount(e.DN, s) {
			return deleted, nil // another instance of the deployment still uses the subtree
		}
		dns = append(dns, e.DN)
	}
	// Leaf first: an entry with more RDNs is deeper.
	sort.SliceStable(dns, func(i, j int) bool { return depth(dns[i]) > depth(dns[j]) })
	for _, dn := range dns {
		if err := c.Del(ldap.NewDelRequest(dn, nil)); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			return deleted, ldapError("deleting "+dn, err)
		}
		deleted++
	}
	return deleted, nil
}

// isBindAccount reports whether dn is a bind account of s's deployment: a direct child
// of its root whose cn starts with "<tenant>-".
func isBindAccount(dn string, s subtree) bool {
	parsed, err := ldap.ParseDN(dn)
	if err != nil || len(parsed.RDNs) == 0 {
		return false
	}
	root, _ := ldap.ParseDN(s.root())
	if len(parsed.RDNs) != len(root.RDNs)+1 {
		return false
	}
	first := parsed.RDNs[0].Attributes
	return len(first) == 1 && strings.EqualFold(first[0].Type, "cn") && strings.HasPrefix(first[0].Value, s.tenant+"-")
}

func depth(dn string) int {
	parsed, err := ldap.ParseDN(dn)
	if err != nil {
		return strings.Count(dn, ",")
	}
	return len(parsed.RDNs)
}

// ldapError turns a server's answer into an sdk error that says what was being done;
// it holds no password (none is ever part of a DN or an operation's description).
func ldapError(doing string, err error) error {
	var le *ldap.Error
	if errors.As(err, &le) {
		switch le.ResultCode {
		case ldap.LDAPResultInsufficientAccessRights:
			return sdk.Unavailable("%s: the directory refused settings/admin_dn the access: give it write access under settings/base_dn", doing)
		case ldap.LDAPResultNoSuchObject:
			return sdk.Unavailable("%s: an entry above it is missing: does settings/base_dn exist on the server?", doing)
		case ldap.LDAPResultObjectClassViolation, ldap.LDAPResultUndefinedAttributeType:
			return sdk.Unavailable("%s: the server lacks a schema: load core, cosine and inetorgperson", doing)
		}
		return sdk.Unavailable("%s: %s", doing, ldap.LDAPResultCodeMap[le.ResultCode])
	}
	return sdk.Unavailable("%s: %v", doing, err)
}
