// Package directory manages the users and groups of a deployment's directory: the
// subtree an ldap provider made (contract.LDAPResult), reached with its bind account.
// Users are inetOrgPerson entries uid=<name> under users_dn, groups groupOfNames entries
// cn=<name> under groups_dn; a user is disabled with the ppolicy attribute
// pwdAccountLockedTime 000001010000Z, which slapd's ppolicy overlay refuses at bind.
// Every call opens its own connection (ldaps:// over TLS, ldap:// in clear, as the
// provider's URL says) and binds as the bind account.
package directory

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Error codes: the API maps them to HTTP statuses.
const (
	CodeInvalid  = "invalid"
	CodeConflict = "conflict"
	CodeNotFound = "not_found"
)

// Error is a refusal before anything changed in the directory: Field names the culprit
// (name, email, groups/N, group), Message says what to do; neither holds the value sent.
type Error struct {
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

func refuse(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Lengths of what a user entry holds, in bytes.
const (
	maxText  = 128
	maxEmail = 254
	// MinPassword and MaxPassword bound a password a user sets.
	MinPassword = 10
	MaxPassword = 256
	pageSize    = 1000
	// locked is ppolicy's value of pwdAccountLockedTime for an account locked until an
	// administrator unlocks it.
	locked = "000001010000Z"
)

var (
	nameRE  = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)
	groupRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
)

// User is a person of the directory.
type User struct {
	// Name is the log-in name (uid).
	Name string `json:"name"`
	// DisplayName is the entry's cn and displayName (Name when empty).
	DisplayName string   `json:"display_name,omitempty"`
	Email       string   `json:"email,omitempty"`
	Disabled    bool     `json:"disabled"`
	Groups      []string `json:"groups"`
}

// Group is a groupOfNames of the directory and its members' names (users only: the
// bind account that stands in as a member is left out).
type Group struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// Directory is one deployment's subtree.
type Directory struct {
	res      contract.LDAPResult
	password string
	users    *ldap.DN
	bind     *ldap.DN
	// Timeout bounds dialling and each request.
	Timeout time.Duration
}

// New checks a directory's result: its URL (ldap:// or ldaps://) and DNs.
func New(res contract.LDAPResult, bindPassword []byte) (*Directory, error) {
	u, err := url.Parse(res.URL)
	if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Host == "" {
		return nil, errors.New("the directory's url is not an ldap:// or ldaps:// URL: provision the deployment again")
	}
	users, err := ldap.ParseDN(res.UsersDN)
	if err != nil {
		return nil, fmt.Errorf("the directory's users_dn: %w", err)
	}
	bind, err := ldap.ParseDN(res.BindDN)
	if err != nil {
		return nil, fmt.Errorf("the directory's bind_dn: %w", err)
	}
	if _, err := ldap.ParseDN(res.GroupsDN); err != nil {
		return nil, fmt.Errorf("the directory's groups_dn: %w", err)
	}
	return &Directory{res: res, password: string(bindPassword), users: users, bind: bind, Timeout: 10 * time.Second}, nil
}

func (d *Directory) conn() (*ldap.Conn, error) {
	u, _ := url.Parse(d.res.URL)
	opts := []ldap.DialOpt{ldap.DialWithDialer(&net.Dialer{Timeout: d.Timeout})}
	if u.Scheme == "ldaps" {
		opts = append(opts, ldap.DialWithTLSConfig(&tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}))
	}
	c, err := ldap.DialURL(d.res.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("the deployment's directory does not answer: %w", err)
	}
	c.SetTimeout(d.Timeout)
	if err := c.Bind(d.res.BindDN, d.password); err != nil {
		c.Close()
		return nil, fmt.Errorf("binding to the deployment's directory as its bind account: %w", err)
	}
	return c, nil
}

func (d *Directory) userDN(name string) string {
	return "uid=" + ldap.EscapeDN(name) + "," + d.res.UsersDN
}

func (d *Directory) groupDN(name string) string {
	return "cn=" + ldap.EscapeDN(name) + "," + d.res.GroupsDN
}

// CheckName refuses a user name that is not ^[a-z][a-z0-9._-]{0,63}$.
func CheckName(field, name string) error {
	if !nameRE.MatchString(name) {
		return refuse(CodeInvalid, field, "a user name is 1 to 64 characters: a lower-case letter, then lower-case letters, digits, '.', '_' or '-' (no spaces)")
	}
	return nil
}

// CheckGroupName refuses a group name that is not ^[a-z][a-z0-9-]{0,62}$.
func CheckGroupName(field, name string) error {
	if !groupRE.MatchString(name) {
		return refuse(CodeInvalid, field, "a group name is 1 to 63 characters: a lower-case letter, then lower-case letters, digits or '-'")
	}
	return nil
}

// CheckPassword refuses a password shorter than MinPassword or longer than MaxPassword
// bytes.
func CheckPassword(field, password string) error {
	if len(password) < MinPassword || len(password) > MaxPassword {
		return refuse(CodeInvalid, field, "a password is %d to %d characters: choose another", MinPassword, MaxPassword)
	}
	return nil
}

func (u User) check() error {
	if err := CheckName("name", u.Name); err != nil {
		return err
	}
	if err := input.Text("display_name", u.DisplayName, maxText); err != nil {
		return refuse(CodeInvalid, "display_name", "%s", err.(*input.Error).Problem)
	}
	if u.Email != "" {
		a, err := mail.ParseAddress(u.Email)
		if err != nil || a.Address != u.Email || len(u.Email) > maxEmail {
			return refuse(CodeInvalid, "email", "is not an e-mail address (name@example.org, at most %d characters)", maxEmail)
		}
	}
	seen := map[string]bool{}
	for i, g := range u.Groups {
		field := fmt.Sprintf("groups/%d", i)
		if err := CheckGroupName(field, g); err != nil {
			return err
		}
		if seen[g] {
			return refuse(CodeInvalid, field, "names a group twice: name each group once")
		}
		seen[g] = true
	}
	return nil
}

// userAttributes are what a listing reads: each one more costs slapd an access check
// per entry.
var userAttributes = []string{"uid", "cn", "mail", "displayName", "pwdAccountLockedTime"}

// Users lists the directory's users, sorted by name, with their groups: a paged search,
// so a directory of any size is listed whole.
func (d *Directory) Users() ([]User, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	groups, err := d.groups(c)
	if err != nil {
		return nil, err
	}
	res, err := c.SearchWithPaging(ldap.NewSearchRequest(d.res.UsersDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=inetOrgPerson)", userAttributes, nil), pageSize)
	if err != nil {
		return nil, fmt.Errorf("listing the directory's users: %w", err)
	}
	return d.withGroups(res.Entries, groups), nil
}

// UsersWithHashes lists the users as Users does, with the userPassword value the
// directory stored for each (its {SCHEME}hash; "" for a user without one), for a move to
// another directory (AddWithHash there). Only the deployment's bind account reads them.
func (d *Directory) UsersWithHashes() ([]User, map[string]string, error) {
	c, err := d.conn()
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	groups, err := d.groups(c)
	if err != nil {
		return nil, nil, err
	}
	res, err := c.SearchWithPaging(ldap.NewSearchRequest(d.res.UsersDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=inetOrgPerson)", append(slices.Clone(userAttributes), "userPassword"), nil), pageSize)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the directory's users: %w", err)
	}
	hashes := make(map[string]string, len(res.Entries))
	for _, e := range res.Entries {
		hashes[e.GetAttributeValue("uid")] = e.GetAttributeValue("userPassword")
	}
	return d.withGroups(res.Entries, groups), hashes, nil
}

// MaxPage is the most users UsersPage answers at once.
const MaxPage = 1000

// noAttributes asks a search for the entries' DNs alone (RFC 4511, 4.5.1.8).
const noAttributes = "1.1"

// UsersPage is a page of Users: at most limit (1 to MaxPage) users whose names sort
// after after ("" for the first page), sorted by name, with their groups, and whether
// more follow. It reads every user's DN (no attribute: slapd's cost is per attribute
// returned) to find the page's names, then only the page's entries, so a page of a
// large directory costs a fraction of the whole list.
func (d *Directory) UsersPage(after string, limit int) ([]User, bool, error) {
	if after != "" {
		if err := CheckName("after", after); err != nil {
			return nil, false, err
		}
	}
	if limit < 1 || limit > MaxPage {
		return nil, false, refuse(CodeInvalid, "limit", "a page is 1 to %d users", MaxPage)
	}
	c, err := d.conn()
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	res, err := c.SearchWithPaging(ldap.NewSearchRequest(d.res.UsersDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=inetOrgPerson)", []string{noAttributes}, nil), pageSize)
	if err != nil {
		return nil, false, fmt.Errorf("listing the directory's users: %w", err)
	}
	names := make([]string, 0, len(res.Entries))
	for _, e := range res.Entries {
		if name, ok := d.memberName(e.DN); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	first := sort.Search(len(names), func(i int) bool { return names[i] > after })
	names = names[first:]
	more := len(names) > limit
	if more {
		names = names[:limit]
	}
	if len(names) == 0 {
		return []User{}, false, nil
	}
	var filter strings.Builder
	filter.WriteString("(&(objectClass=inetOrgPerson)(|")
	for _, n := range names {
		filter.WriteString("(uid=" + ldap.EscapeFilter(n) + ")")
	}
	filter.WriteString("))")
	res, err = c.SearchWithPaging(ldap.NewSearchRequest(d.res.UsersDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false,
		filter.String(), userAttributes, nil), pageSize)
	if err != nil {
		return nil, false, fmt.Errorf("reading a page of the directory's users: %w", err)
	}
	groups, err := d.groups(c)
	if err != nil {
		return nil, false, err
	}
	out := d.withGroups(res.Entries, groups)
	return out, more, nil
}

// withGroups are the users of entries, sorted by name, each with the groups it is a
// member of.
func (d *Directory) withGroups(entries []*ldap.Entry, groups []Group) []User {
	of := map[string][]string{}
	for _, g := range groups {
		for _, m := range g.Members {
			of[m] = append(of[m], g.Name)
		}
	}
	out := make([]User, 0, len(entries))
	for _, e := range entries {
		u := userOf(e)
		u.Groups = of[u.Name]
		if u.Groups == nil {
			u.Groups = []string{}
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func userOf(e *ldap.Entry) User {
	u := User{Name: e.GetAttributeValue("uid"), DisplayName: e.GetAttributeValue("displayName"), Email: e.GetAttributeValue("mail"),
		Disabled: e.GetAttributeValue("pwdAccountLockedTime") == locked}
	if u.DisplayName == "" {
		u.DisplayName = e.GetAttributeValue("cn")
	}
	return u
}

// User is one user with its groups; a not_found Error when there is none of that name.
func (d *Directory) User(name string) (User, error) {
	if err := CheckName("name", name); err != nil {
		return User{}, err
	}
	c, err := d.conn()
	if err != nil {
		return User{}, err
	}
	defer c.Close()
	e, err := d.userEntry(c, name)
	if err != nil {
		return User{}, err
	}
	u := userOf(e)
	groups, err := d.groups(c)
	if err != nil {
		return User{}, err
	}
	u.Groups = []string{}
	for _, g := range groups {
		for _, m := range g.Members {
			if m == name {
				u.Groups = append(u.Groups, g.Name)
			}
		}
	}
	return u, nil
}

func (d *Directory) userEntry(c *ldap.Conn, name string) (*ldap.Entry, error) {
	res, err := c.Search(ldap.NewSearchRequest(d.userDN(name), ldap.ScopeBaseObject, ldap.NeverDerefAliases, 1, 0, false,
		"(objectClass=inetOrgPerson)", userAttributes, nil))
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) || (err == nil && len(res.Entries) == 0) {
		return nil, refuse(CodeNotFound, "name", "no user of that name in this deployment's directory: GET the deployment's users to see them")
	}
	if err != nil {
		return nil, fmt.Errorf("reading a user of the directory: %w", err)
	}
	return res.Entries[0], nil
}

// Groups lists the directory's groups, sorted by name, with their members.
func (d *Directory) Groups() ([]Group, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return d.groups(c)
}

func (d *Directory) groups(c *ldap.Conn) ([]Group, error) {
	res, err := c.SearchWithPaging(ldap.NewSearchRequest(d.res.GroupsDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=groupOfNames)", []string{"cn", "member"}, nil), pageSize)
	if err != nil {
		return nil, fmt.Errorf("listing the directory's groups: %w", err)
	}
	out := make([]Group, 0, len(res.Entries))
	for _, e := range res.Entries {
		g := Group{Name: e.GetAttributeValue("cn"), Members: []string{}}
		for _, m := range e.GetAttributeValues("member") {
			if name, ok := d.memberName(m); ok {
				g.Members = append(g.Members, name)
			}
		}
		sort.Strings(g.Members)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// memberName is the user name of a member DN directly under users_dn. A DN of the
// form fedhost writes (uid=<name>,<users_dn>, a name that needs no escaping) is read
// without parsing it: a listing reads 10,000 of them, and ldap.ParseDN of each took more
// time than slapd's answer.
func (d *Directory) memberName(member string) (string, bool) {
	suffix := "," + d.res.UsersDN
	if len(member) > len("uid=")+len(suffix) && strings.EqualFold(member[:len("uid=")], "uid=") &&
		strings.EqualFold(member[len(member)-len(suffix):], suffix) {
		if name := member[len("uid=") : len(member)-len(suffix)]; nameRE.MatchString(name) {
			return name, true
		}
	}
	dn, err := ldap.ParseDN(member)
	if err != nil || len(dn.RDNs) != len(d.users.RDNs)+1 || len(dn.RDNs[0].Attributes) != 1 {
		return "", false
	}
	parent := &ldap.DN{RDNs: dn.RDNs[1:]}
	a := dn.RDNs[0].Attributes[0]
	if !strings.EqualFold(a.Type, "uid") || !parent.EqualFold(d.users) {
		return "", false
	}
	return a.Value, true
}

// Add makes a user with no password (an invitation link sets it) in the groups it
// names. Every field and group is checked first; a failure after the entry was made
// removes it again, so nothing is left half-made.
func (d *Directory) Add(u User) error {
	return d.add(u, "")
}

// AddWithHash adds a user whose password is passwordHash, a userPassword value as a
// directory stored it (RFC 3112: {SSHA}..., {ARGON2}...): an imported user then signs in
// with the password it had at the source. The directory stores the value as it is, so a
// value without a {SCHEME} prefix, a clear text password, is refused.
func (d *Directory) AddWithHash(u User, passwordHash string) error {
	if !passwordScheme.MatchString(passwordHash) || len(passwordHash) > maxPasswordHash {
		return refuse(CodeInvalid, "password_hash", "is not a hashed userPassword value ({SCHEME}hash, at most %d characters): export the user again at the source", maxPasswordHash)
	}
	return d.add(u, passwordHash)
}

// maxPasswordHash bounds a hashed userPassword value (migration.User's bound).
const maxPasswordHash = 1024

var passwordScheme = regexp.MustCompile(`^\{[A-Za-z0-9.-]{1,32}\}[!-~]+$`)

func (d *Directory) add(u User, passwordHash string) error {
	if err := u.check(); err != nil {
		return err
	}
	c, err := d.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	groups, err := d.groups(c)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, g := range groups {
		have[g.Name] = true
	}
	for i, g := range u.Groups {
		if !have[g] {
			return refuse(CodeNotFound, fmt.Sprintf("groups/%d", i), "no group of that name in this deployment's directory: choose one of its groups")
		}
	}
	cn := u.DisplayName
	if cn == "" {
		cn = u.Name
	}
	add := ldap.NewAddRequest(d.userDN(u.Name), nil)
	add.Attribute("objectClass", []string{"inetOrgPerson"})
	add.Attribute("uid", []string{u.Name})
	add.Attribute("cn", []string{cn})
	add.Attribute("sn", []string{u.Name})
	for attr, v := range map[string]string{"displayName": u.DisplayName, "mail": u.Email, "userPassword": passwordHash} {
		if v != "" {
			add.Attribute(attr, []string{v})
		}
	}
	if err := c.Add(add); err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
			return refuse(CodeConflict, "name", "a user of that name exists already in this deployment's directory: choose another name")
		}
		return fmt.Errorf("adding a user to the directory: %w", err)
	}
	for _, g := range u.Groups {
		if err := d.addMember(c, g, u.Name); err != nil {
			if cleanup := d.remove(c, u.Name); cleanup != nil {
				return fmt.Errorf("%w (and removing the half-made user: %v)", err, cleanup)
			}
			return err
		}
	}
	return nil
}

// Delete removes a user from every group, then its entry.
func (d *Directory) Delete(name string) error {
	if err := CheckName("name", name); err != nil {
		return err
	}
	c, err := d.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := d.userEntry(c, name); err != nil {
		return err
	}
	return d.remove(c, name)
}

func (d *Directory) remove(c *ldap.Conn, name string) error {
	res, err := c.SearchWithPaging(ldap.NewSearchRequest(d.res.GroupsDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases, 0, 0, false,
		"(&(objectClass=groupOfNames)(member="+ldap.EscapeFilter(d.userDN(name))+"))", []string{"cn"}, nil), pageSize)
	if err != nil {
		return fmt.Errorf("finding a user's groups: %w", err)
	}
	for _, e := range res.Entries {
		if err := d.removeMember(c, e.GetAttributeValue("cn"), name); err != nil {
			return err
		}
	}
	if err := c.Del(ldap.NewDelRequest(d.userDN(name), nil)); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return fmt.Errorf("deleting a user of the directory: %w", err)
	}
	return nil
}

// SetDisabled locks (disabled) or unlocks a user's account: a locked one cannot bind,
// so it cannot sign in anywhere that asks the directory.
func (d *Directory) SetDisabled(name string, disabled bool) error {
	if err := CheckName("name", name); err != nil {
		return err
	}
	c, err := d.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	e, err := d.userEntry(c, name)
	if err != nil {
		return err
	}
	now := e.GetAttributeValue("pwdAccountLockedTime") != ""
	if now == disabled {
		return nil
	}
	m := ldap.NewModifyRequest(d.userDN(name), nil)
	if disabled {
		m.Replace("pwdAccountLockedTime", []string{locked})
	} else {
		m.Delete("pwdAccountLockedTime", nil)
	}
	if err := c.Modify(m); err != nil {
		return fmt.Errorf("locking or unlocking a user of the directory: %w", err)
	}
	return nil
}

// SetPassword sets a user's password with the Password Modify operation (RFC 3062), so
// that slapd stores it hashed.
func (d *Directory) SetPassword(name, password string) error {
	if err := CheckName("name", name); err != nil {
		return err
	}
	if err := CheckPassword("password", password); err != nil {
		return err
	}
	c, err := d.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := d.userEntry(c, name); err != nil {
		return err
	}
	if _, err := c.PasswordModify(ldap.NewPasswordModifyRequest(d.userDN(name), "", password)); err != nil {
		return fmt.Errorf("setting a user's password in the directory: %w", err)
	}
	return nil
}

// AddToGroup puts a user in a group; a member already is fine.
func (d *Directory) AddToGroup(name, group string) error {
	c, err := d.member(name, group)
	if err != nil {
		return err
	}
	defer c.Close()
	return d.addMember(c, group, name)
}

// RemoveFromGroup takes a user out of a group; not a member is fine.
func (d *Directory) RemoveFromGroup(name, group string) error {
	c, err := d.member(name, group)
	if err != nil {
		return err
	}
	defer c.Close()
	return d.removeMember(c, group, name)
}

// member checks a user and a group and returns a connection to change the group on.
func (d *Directory) member(name, group string) (*ldap.Conn, error) {
	if err := CheckName("name", name); err != nil {
		return nil, err
	}
	if err := CheckGroupName("group", group); err != nil {
		return nil, err
	}
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	if _, err := d.userEntry(c, name); err != nil {
		c.Close()
		return nil, err
	}
	res, err := c.Search(ldap.NewSearchRequest(d.groupDN(group), ldap.ScopeBaseObject, ldap.NeverDerefAliases, 1, 0, false, "(objectClass=groupOfNames)", []string{"cn"}, nil))
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) || (err == nil && len(res.Entries) == 0) {
		c.Close()
		return nil, refuse(CodeNotFound, "group", "no group of that name in this deployment's directory: choose one of its groups")
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading a group of the directory: %w", err)
	}
	return c, nil
}

func (d *Directory) addMember(c *ldap.Conn, group, name string) error {
	m := ldap.NewModifyRequest(d.groupDN(group), nil)
	m.Add("member", []string{d.userDN(name)})
	if err := c.Modify(m); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultAttributeOrValueExists) {
		return fmt.Errorf("adding a member to group %s: %w", group, err)
	}
	return nil
}

// removeMember takes name out of group; when it was the last member, the bind account
// stands in, since a groupOfNames needs one.
func (d *Directory) removeMember(c *ldap.Conn, group, name string) error {
	m := ldap.NewModifyRequest(d.groupDN(group), nil)
	m.Delete("member", []string{d.userDN(name)})
	err := c.Modify(m)
	if ldap.IsErrorWithCode(err, ldap.LDAPResultObjectClassViolation) {
		m = ldap.NewModifyRequest(d.groupDN(group), nil)
		m.Replace("member", []string{d.res.BindDN})
		err = c.Modify(m)
	}
	if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchAttribute) {
		return fmt.Errorf("removing a member of group %s: %w", group, err)
	}
	return nil
}
