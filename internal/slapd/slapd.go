// Package slapd sets up an OpenLDAP slapd in a directory of its own (a cn=config made
// with slapadd, one mdb database with the core, cosine, nis and inetorgperson schemas, a
// root DN, the ppolicy overlay (a locked account cannot bind) and the tenant-isolation
// rules of the openldap ldap provider) and runs it as a child that ends with its parent:
// the provider's managed mode and its tests use it.
package slapd

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/internal/child"
)

// Dir is a slapd's directory:
//
//	slapd.d/    its cn=config
//	data/       the mdb database
//	slapd.log   its output
type Dir string

func (d Dir) configDir() string { return filepath.Join(string(d), "slapd.d") }
func (d Dir) dataDir() string   { return filepath.Join(string(d), "data") }

// LogPath is the file slapd writes its output to.
func (d Dir) LogPath() string { return filepath.Join(string(d), "slapd.log") }

// Initialised reports whether Init has made the configuration.
func (d Dir) Initialised() bool {
	_, err := os.Stat(filepath.Join(d.configDir(), "cn=config.ldif"))
	return err == nil
}

var dcRE = regexp.MustCompile(`^dc=[a-z0-9-]+(,dc=[a-z0-9-]+)*$`)

// TenantACL are the olcAccess rules that isolate tenants under base (dc= components
// only): an entry directly under ou=<tenant>,<base> (the bind accounts
// cn=<tenant>-<instance>; ou=users and ou=groups have no password) may read and write
// ou=<tenant>,<base> and everything under it and nothing else; anybody may bind
// (authenticate) with a password there; nothing else is readable. The openldap
// provider's README shows the same rules for a hand-made slapd.
//
// What they cost is slapd's regexec of the entry's DN, once per rule tried and per
// attribute of each entry returned (slapd matches a rule's DN before its attrs): the
// binder is matched with dn.onelevel,expand rather than a second dn.regex, which slapd
// would compile at every check; the first rule serves the binder for every attribute,
// the password included, so a listing by the bind account pays one regexec per
// attribute instead of two (the password's rule comes second, for everybody else);
// and the pattern is anchored at a comma or the start rather than with ^(.+,)?, which
// glibc matches in half the time (the same DNs match, with the same $2).
func TenantACL(base string) []string {
	suffix := regexp.QuoteMeta(base)
	to := fmt.Sprintf(`dn.regex="(^|,)ou=([^,]+),%s$"`, suffix)
	owner := fmt.Sprintf(`dn.onelevel,expand="ou=$2,%s"`, base)
	return []string{
		fmt.Sprintf(`to %s by %s write by * break`, to, owner),
		fmt.Sprintf(`to %s attrs=userPassword by anonymous auth by * none`, to),
		`to * by * none`,
	}
}

// Init writes the configuration and the base entry into d, which must exist and hold
// no configuration yet: base (dc= components) is the database's suffix, adminDN and
// adminPassword its root DN.
func (d Dir) Init(base, adminDN, adminPassword string) error {
	return d.init(base, adminDN, adminPassword, TenantACL(base))
}

// init is Init with the olcAccess rules of the database given.
func (d Dir) init(base, adminDN, adminPassword string, rules []string) error {
	if !dcRE.MatchString(base) {
		return fmt.Errorf("slapd: the base DN is not dc= components (dc=example,dc=org)")
	}
	if d.Initialised() {
		return fmt.Errorf("slapd: %s holds a configuration already", d)
	}
	slapadd, err := LookPath("slapadd")
	if err != nil {
		return err
	}
	// A configuration that a failed Init left half-made is removed first.
	for _, dir := range []string{d.configDir(), d.dataDir()} {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
	}
	if err := d.slapadd(slapadd, "", d.configLDIF(base, adminDN, adminPassword, rules)); err != nil {
		return err
	}
	first := strings.TrimPrefix(strings.SplitN(base, ",", 2)[0], "dc=")
	entry := fmt.Sprintf("dn: %s\nobjectClass: dcObject\nobjectClass: organization\ndc: %s\no: fedhost\n", base, first)
	// ppolicy looks at pwdAccountLockedTime only for entries a policy applies to: this
	// default one sets pwdLockout and no other rule (pwdMaxFailure 0: failed binds lock nobody).
	entry += fmt.Sprintf("\ndn: %s\nobjectClass: organizationalRole\nobjectClass: pwdPolicy\ncn: password-policy\npwdAttribute: userPassword\npwdLockout: TRUE\n", PolicyDN(base))
	return d.slapadd(slapadd, base, entry)
}

// PolicyDN is the default password policy's entry under base.
func PolicyDN(base string) string { return "cn=password-policy," + base }

// LookPath finds a slapd program in PATH or /usr/sbin.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if p := "/usr/sbin/" + name; isFile(p) {
		return p, nil
	}
	return "", fmt.Errorf("%s is not installed: apt-get install slapd ldap-utils (Debian packages slapd, ldap-utils)", name)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// configLDIF is the cn=config. Its olcLimits let an authenticated bind account page
// through a directory of any size (500 entries a search otherwise, at most 1,000 a page);
// uid and member are indexed for the host's look-ups of a user and of a user's groups.
func (d Dir) configLDIF(base, adminDN, adminPassword string, rules []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: %[1]s/slapd.pid
olcArgsFile: %[1]s/slapd.args

dn: cn=module{0},cn=config
objectClass: olcModuleList
cn: module{0}
olcModulePath: /usr/lib/ldap
olcModuleLoad: back_mdb
olcModuleLoad: ppolicy

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

include: file:///etc/ldap/schema/core.ldif

include: file:///etc/ldap/schema/cosine.ldif

include: file:///etc/ldap/schema/nis.ldif

include: file:///etc/ldap/schema/inetorgperson.ldif

dn: olcDatabase={-1}frontend,cn=config
objectClass: olcDatabaseConfig
objectClass: olcFrontendConfig
olcDatabase: {-1}frontend
olcPasswordHash: {SSHA}

dn: olcDatabase={0}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {0}config
olcAccess: {0}to * by * none

dn: olcDatabase={1}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {1}mdb
olcDbDirectory: %[2]s
olcSuffix: %[3]s
olcRootDN: %[4]s
olcRootPW: %[5]s
olcDbMaxSize: 1073741824
olcDbIndex: objectClass eq
olcDbIndex: uid,member eq
olcLimits: {0}users size.soft=500 size.hard=500 size.pr=1000 size.prtotal=unlimited
`, string(d), d.dataDir(), base, adminDN, SSHA(adminPassword))
	for i, rule := range rules {
		fmt.Fprintf(&b, "olcAccess: {%d}%s\n", i, rule)
	}
	// The ppolicy overlay refuses the bind of an entry whose pwdAccountLockedTime is
	// 000001010000Z (how fedhost disables a user) and hashes a userPassword written in clear.
	b.WriteString(`
dn: olcOverlay={0}ppolicy,olcDatabase={1}mdb,cn=config
objectClass: olcOverlayConfig
objectClass: olcPPolicyConfig
olcOverlay: {0}ppolicy
olcPPolicyHashCleartext: TRUE
`)
	fmt.Fprintf(&b, "olcPPolicyDefault: %s\n", PolicyDN(base))
	return b.String()
}

// slapadd loads ldif into cn=config (base "") or the database of base.
func (d Dir) slapadd(bin, base, ldif string) error {
	file := filepath.Join(string(d), "slapadd.ldif")
	if err := os.WriteFile(file, []byte(ldif), 0o600); err != nil {
		return err
	}
	defer os.Remove(file) // it holds the root DN's hash
	args := []string{"-F", d.configDir(), "-l", file}
	if base == "" {
		args = append(args, "-n", "0")
	} else {
		args = append(args, "-b", base)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("slapadd into %s: %v: %s", d, err, bytes.TrimSpace(out))
	}
	return nil
}

// Process is a running slapd.
type Process struct {
	// URL is ldap://127.0.0.1:port/.
	URL    string
	cmd    *exec.Cmd
	exited <-chan struct{}
}

// ErrExited is returned by Start when slapd ended before it answered.
var ErrExited = errors.New("slapd exited at start")

// Start runs slapd from d in the foreground on 127.0.0.1:port, as a child that gets
// SIGTERM when its parent ends (Pdeathsig), and waits until adminDN binds with password.
func (d Dir) Start(port int, adminDN, password string, timeout time.Duration) (*Process, error) {
	bin, err := LookPath("slapd")
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(d.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	p := &Process{URL: fmt.Sprintf("ldap://127.0.0.1:%d/", port)}
	// -d 0 keeps slapd in the foreground without debug output.
	p.cmd = exec.Command(bin, "-d", "0", "-s", "0", "-h", p.URL, "-F", d.configDir())
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if p.exited, err = child.Start(p.cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := p.ping(adminDN, password)
		if err == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%w:\n%s", ErrExited, child.Tail(d.LogPath(), 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("slapd did not answer a bind within %s: %v\n%s", timeout, err, child.Tail(d.LogPath(), 30))
		}
	}
}

func (p *Process) ping(adminDN, password string) error {
	c, err := ldap.DialURL(p.URL, ldap.DialWithDialer(&net.Dialer{Timeout: time.Second}))
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Bind(adminDN, password)
}

// Running reports whether the process has not ended.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop ends slapd (SIGTERM: it closes the database cleanly) and waits for it, killing
// it after 10 seconds.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// SSHA is the {SSHA} form of password slapd's olcRootPW takes (a salted SHA-1, as
// slappasswd writes it): computed here rather than by running slappasswd, whose output
// would have to be parsed.
func SSHA(password string) string {
	salt := make([]byte, 8)
	_, _ = rand.Read(salt)
	h := sha1.New()
	h.Write([]byte(password))
	h.Write(salt)
	return "{SSHA}" + base64.StdEncoding.EncodeToString(append(h.Sum(nil), salt...))
}
