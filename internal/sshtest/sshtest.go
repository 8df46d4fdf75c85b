// Package sshtest starts a real OpenSSH sshd on loopback for tests: a temporary host key,
// a temporary client key in its own AuthorizedKeysFile, no passwords, logging in as the
// user the tests run as.
package sshtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fedhost/fedhost/internal/child"
)

// Server is a running sshd.
type Server struct {
	// Addr is 127.0.0.1:port of its listener.
	Addr string
	// User is the user it lets in: the one the tests run as.
	User string
	// HostKey is its host public key in authorized_keys format.
	HostKey string
	// ClientKeyFile holds the unencrypted private key it lets User in with.
	ClientKeyFile string
	// Dir holds its configuration, keys and log.
	Dir string
}

// Start runs /usr/sbin/sshd -D -e from a configuration written in dir, as a child killed
// with the test process, and waits until it accepts connections.
func Start(dir string) (*Server, func(), error) {
	bin := "/usr/sbin/sshd"
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("sshd is not installed: apt-get install openssh-server")
	}
	u, err := user.Current()
	if err != nil {
		return nil, nil, err
	}
	port, err := child.FreePort()
	if err != nil {
		return nil, nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), User: u.Username, Dir: dir, ClientKeyFile: filepath.Join(dir, "client_ed25519")}
	hostKey := filepath.Join(dir, "host_ed25519")
	for _, k := range []string{hostKey, s.ClientKeyFile} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sshtest", "-f", k).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return nil, nil, err
	}
	s.HostKey = strings.TrimSpace(string(pub))
	client, err := os.ReadFile(s.ClientKeyFile + ".pub")
	if err != nil {
		return nil, nil, err
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, client, 0o600); err != nil {
		return nil, nil, err
	}
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
StrictModes no
PermitRootLogin prohibit-password
AllowUsers %s
Subsystem sftp internal-sftp
LogLevel VERBOSE
`, port, hostKey, filepath.Join(dir, "sshd.pid"), authorized, u.Username)
	confFile := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, nil, err
	}
	if os.Geteuid() == 0 {
		// As root sshd wants its privilege separation directory, which Debian makes at boot.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, nil, err
		}
	}
	logPath := filepath.Join(dir, "sshd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-D", "-e", "-f", confFile)
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
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return s, stop, nil
		}
		select {
		case <-exited:
			return nil, nil, fmt.Errorf("sshd exited at start:\n%s", child.Tail(logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("sshd did not accept connections within 20s: %v\n%s", err, child.Tail(logPath, 30))
		}
	}
}

// Log is the end of sshd's log, for a failing test's message.
func (s *Server) Log() string { return child.Tail(filepath.Join(s.Dir, "sshd.log"), 40) }
