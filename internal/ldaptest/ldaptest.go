// Package ldaptest starts a real OpenLDAP slapd on loopback for tests, from a temporary
// cn=config: one mdb database with the core, cosine, nis and inetorgperson schemas, a
// root DN with a password, and the static tenant-isolation rule of the openldap ldap
// provider (TenantACL).
package ldaptest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
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

var dcRE = regexp.MustCompile(`^dc=[a-z0-9-]+(,dc=[a-z0-9-]+)*$`)

// TenantACL are the olcAccess rules that isolate tenants under base (dc=... components
// only): the bind account cn=<tenant>-<instance>,ou=<tenant>,<base> may read and write
// ou=<tenant>,<base> and everything under it and nothing else; anybody may bind
// (authenticate) with a password there; nothing else is readable. The openldap
// provider's README shows the same rules for a hand-made slapd.
func TenantACL(base string) []string {
	suffix := regexp.QuoteMeta(base)
	to := fmt.Sprintf(`dn.regex="^(.+,)?ou=([^,]+),%s$"`, suffix)
	owner := fmt.Sprintf(`dn.regex="^cn=$2-[^,]+,ou=$2,%s$"`, suffix)
	return []string{
		fmt.Sprintf(`to %s attrs=userPassword by %s write by anonymous auth by * none`, to, owner),
		fmt.Sprintf(`to %s by %s write by * none`, to, owner),
		`to * by * none`,
	}
}

// Start writes a cn=config for a slapd on a free port of 127.0.0.1 in dir, loads it with
// slapadd, runs slapd in the foreground as a child killed with the test process
// (Pdeathsig), and waits until the root DN can bind.
func Start(dir string) (*Server, func(), error) {
	bin, err := lookPath("slapd")
	if err != nil {
		return nil, nil, err
	}
	slapadd, err := lookPath("slapadd")
	if err != nil {
		return nil, nil, err
	}
	port, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	s := &Server{
		URL:               fmt.Sprintf("ldap://127.0.0.1:%d/", port),
		BaseDN:            BaseDN,
		AdminDN:           "cn=admin," + BaseDN,
		AdminPassword:     newPassword(),
		AdminPasswordFile: filepath.Join(dir, "admin-password"),
		Dir:               dir,
	}
	if !dcRE.MatchString(s.BaseDN) {
		return nil, nil, fmt.Errorf("ldaptest: base DN %q is not dc= components", s.BaseDN)
	}
	if err := os.WriteFile(s.AdminPasswordFile, []byte(s.AdminPassword+"\n"), 0o600); err != nil {
		return nil, nil, err
	}
	configDir, dataDir := filepath.Join(dir, "slapd.d"), filepath.Join(dir, "data")
	for _, d := range []string{configDir, dataDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, nil, err
		}
	}
	if err := s.slapadd(slapadd, configDir, "0", s.configLDIF(dataDir)); err != nil {
		return nil, nil, err
	}
	base := fmt.Sprintf("dn: %s\nobjectClass: dcObject\nobjectClass: organization\ndc: %s\no: fedhost tests\n",
		s.BaseDN, strings.TrimPrefix(strings.SplitN(s.BaseDN, ",", 2)[0], "dc="))
	if err := s.slapadd(slapadd, configDir, "1", base); err != nil {
		return nil, nil, err
	}

	logFile, err := os.Create(s.logPath())
	if err != nil {
		return nil, nil, err
	}
	defer logFile.Close()
	// -d 0 keeps slapd in the foreground without debug output; stats logging goes to stderr.
	cmd := exec.Command(bin, "-d", "0", "-s", "0", "-h", s.URL, "-F", configDir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited, err := child.Start(cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := s.ping()
		if err == nil {
			return s, stop, nil
		}
		select {
		case <-exited:
			return nil, nil, fmt.Errorf("slapd exited at start:\n%s", child.Tail(s.logPath(), 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("slapd did not answer a bind within 20s: %v\n%s", err, child.Tail(s.logPath(), 30))
		}
	}
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p, nil
	}
	return "", fmt.Errorf("%s is not installed: apt-get install slapd ldap-utils (Debian packages slapd, ldap-utils)", name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (s *Server) configLDIF(dataDir string) string {
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
`, s.Dir, dataDir, s.BaseDN, s.AdminDN, ssha(s.AdminPassword))
	for i, rule := range TenantACL(s.BaseDN) {
		fmt.Fprintf(&b, "olcAccess: {%d}%s\n", i, rule)
	}
	return b.String()
}

func (s *Server) slapadd(bin, configDir, db, ldif string) error {
	file := filepath.Join(s.Dir, "slapadd-"+db+".ldif")
	if err := os.WriteFile(file, []byte(ldif), 0o600); err != nil {
		return err
	}
	args := []string{"-F", configDir, "-l", file}
	if db == "0" {
		args = append(args, "-n", "0")
	} else {
		args = append(args, "-b", s.BaseDN)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("slapadd of database %s: %v: %s", db, err, bytes.TrimSpace(out))
	}
	return nil
}

func (s *Server) ping() error {
	c, err := ldap.DialURL(s.URL, ldap.DialWithDialer(&net.Dialer{Timeout: time.Second}))
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Bind(s.AdminDN, s.AdminPassword)
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

func (s *Server) logPath() string { return filepath.Join(s.Dir, "slapd.log") }

// Log is the end of slapd's log, for a failing test's message.
func (s *Server) Log() string { return strings.TrimSpace(child.Tail(s.logPath(), 20)) }

func newPassword() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ssha is the {SSHA} form of password slapd's olcRootPW takes (a salted SHA-1, as
// slappasswd writes it): computed here rather than by running slappasswd, whose output
// would have to be parsed.
func ssha(password string) string {
	salt := make([]byte, 8)
	_, _ = rand.Read(salt)
	h := sha1.New()
	h.Write([]byte(password))
	h.Write(salt)
	return "{SSHA}" + base64.StdEncoding.EncodeToString(append(h.Sum(nil), salt...))
}
