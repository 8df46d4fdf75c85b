// Package bindtest starts a real BIND named on loopback for tests: the primary the
// rfc2136 dns provider manages, and the authoritative server an ACME test CA (pebble)
// resolves challenges through. Its zones are added at run time (allow-new-zones), as the
// rfc2136 provider and AddZone do.
package bindtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fedhost/fedhost/internal/child"
)

// Server is a running named.
type Server struct {
	// Dir holds its configuration, its log and its zones.
	Dir string
	// DNSAddr is 127.0.0.1:port of its DNS listener (UDP and TCP).
	DNSAddr string
	// ControlPort is its rndc control channel's port on 127.0.0.1.
	ControlPort int
	// RNDCKeyFile holds the control channel's key ("rndc-key"), as rndc -c reads it.
	RNDCKeyFile string
	// KeysFile is included by named.conf and starts empty: the rfc2136 provider's keys
	// file. AddZone writes its keys to a file of its own.
	KeysFile string
	// ZonesDir is an empty directory for the rfc2136 provider's zone files.
	ZonesDir string

	mu       sync.Mutex // AddZone's keys file and reconfig, one at a time
	testKeys string
	testDir  string
	keys     []string
}

// Start runs named in the foreground from a configuration written in dir, as a child
// killed with the test process (Pdeathsig), and waits until its control channel answers.
func Start(dir string) (*Server, func(), error) {
	bin, err := exec.LookPath("named")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/named"); serr != nil {
			return nil, nil, fmt.Errorf("named is not installed: apt-get install bind9 bind9-utils (Debian packages bind9, bind9-utils)")
		}
		bin = "/usr/sbin/named"
	}
	if _, err := exec.LookPath("rndc"); err != nil {
		return nil, nil, fmt.Errorf("rndc is not installed: apt-get install bind9-utils")
	}
	dnsPort, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	controlPort, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	s := &Server{
		Dir:         dir,
		DNSAddr:     fmt.Sprintf("127.0.0.1:%d", dnsPort),
		ControlPort: controlPort,
		RNDCKeyFile: filepath.Join(dir, "rndc.key"),
		KeysFile:    filepath.Join(dir, "fedhost-keys.conf"),
		ZonesDir:    filepath.Join(dir, "zones"),
		testKeys:    filepath.Join(dir, "bindtest-keys.conf"),
		testDir:     filepath.Join(dir, "bindtest-zones"),
	}
	for _, d := range []string{s.ZonesDir, s.testDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	if err := os.WriteFile(s.RNDCKeyFile, fmt.Appendf(nil, "key \"rndc-key\" {\n\talgorithm hmac-sha256;\n\tsecret %q;\n};\n", newSecret()), 0o600); err != nil {
		return nil, nil, err
	}
	for _, f := range []string{s.KeysFile, s.testKeys} {
		if err := os.WriteFile(f, nil, 0o640); err != nil {
			return nil, nil, err
		}
	}
	conf := fmt.Sprintf(`include %q;
include %q;
include %q;
controls { inet 127.0.0.1 port %d allow { 127.0.0.1; } keys { "rndc-key"; }; };
options {
	directory %q;
	pid-file %q;
	listen-on port %d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	allow-new-zones yes;
	notify no;
};
logging { channel default_stderr { stderr; severity info; }; category default { default_stderr; }; };
`, s.RNDCKeyFile, s.KeysFile, s.testKeys, controlPort, dir, filepath.Join(dir, "named.pid"), dnsPort)
	confFile := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return nil, nil, err
	}
	logFile, err := os.Create(s.logPath())
	if err != nil {
		return nil, nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-g", "-c", confFile, "-4")
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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.rndc(ctx, "status")
		cancel()
		if err == nil {
			return s, stop, nil
		}
		select {
		case <-exited:
			return nil, nil, fmt.Errorf("named exited at start:\n%s", child.Tail(s.logPath(), 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("named's control channel did not answer within 20s: %v\n%s", err, child.Tail(s.logPath(), 30))
		}
	}
}

func (s *Server) logPath() string { return filepath.Join(s.Dir, "named.log") }

// Log is the end of named's log, for a failing test's message.
func (s *Server) Log() string { return strings.TrimSpace(child.Tail(s.logPath(), 20)) }

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func (s *Server) rndc(ctx context.Context, args ...string) error {
	full := append([]string{"-c", s.RNDCKeyFile, "-y", "rndc-key", "-s", "127.0.0.1", "-p", strconv.Itoa(s.ControlPort)}, args...)
	out, err := exec.CommandContext(ctx, "rndc", full...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rndc %s: %v: %s", args[0], err, bytes.TrimSpace(out))
	}
	return nil
}

var zoneRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z]+$`)

// AddZone adds the primary zone zone (no trailing dot) with a TSIG key of its own that
// may update anything in it, the way a deployment's dns result gives one. The zone's
// apex and every name under it (a wildcard) have the address 127.0.0.1, so a CA that
// resolves through this server reaches a test's HTTP-01 listener. It returns the key's
// name (fully qualified), its algorithm and its base64 secret.
func (s *Server) AddZone(ctx context.Context, zone string) (keyName, algorithm, secret string, err error) {
	if !zoneRE.MatchString(zone) {
		return "", "", "", fmt.Errorf("bindtest: %q is not a lower-case zone name", zone)
	}
	keyName, algorithm, secret = "update."+zone+".", "hmac-sha256", newSecret()
	file := filepath.Join(s.testDir, zone+".db")
	records := fmt.Sprintf("$TTL 60\n@ SOA ns.%[1]s. hostmaster.%[1]s. 1 3600 600 86400 60\n@ NS ns.%[1]s.\n@ A 127.0.0.1\n* A 127.0.0.1\n", zone)
	if err := os.WriteFile(file, []byte(records), 0o644); err != nil {
		return "", "", "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, fmt.Sprintf("key %q { algorithm %s; secret %q; };\n", keyName, algorithm, secret))
	if err := os.WriteFile(s.testKeys, []byte(strings.Join(s.keys, "")), 0o640); err != nil {
		return "", "", "", err
	}
	if err := s.rndc(ctx, "reconfig"); err != nil {
		return "", "", "", err
	}
	conf := fmt.Sprintf(`{ type primary; file %q; update-policy { grant %q zonesub ANY; }; };`, file, keyName)
	if err := s.rndc(ctx, "addzone", zone, conf); err != nil {
		return "", "", "", err
	}
	return keyName, algorithm, secret, nil
}
