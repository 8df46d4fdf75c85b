package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/plugintest"
)

// testServer is the named every test of this binary shares: started by TestMain on
// 127.0.0.1 from a config in a temp dir, with its own control channel and key, new zones
// allowed, and the plugin's keys file included.
var testServer struct {
	dir, dnsAddr, rndcKeyFile, keysFile, zonesDir, pluginBinary string
	controlPort                                                 int
}

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.MainWithServer(m, "named", startNamed)
}

// startNamed starts named in the foreground as a child killed with the test process
// (Pdeathsig), and waits until its control channel answers.
func startNamed(dir string) (stop func(), err error) {
	bin, err := exec.LookPath("named")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/named"); serr != nil {
			return nil, fmt.Errorf("named is not installed: apt-get install bind9 bind9-utils (Debian packages bind9, bind9-utils)")
		}
		bin = "/usr/sbin/named"
	}
	if _, err := exec.LookPath("rndc"); err != nil {
		return nil, fmt.Errorf("rndc is not installed: apt-get install bind9-utils")
	}
	dnsPort, err := child.FreePort()
	if err != nil {
		return nil, err
	}
	controlPort, err := child.FreePort()
	if err != nil {
		return nil, err
	}
	ts := &testServer
	ts.dir = dir
	ts.dnsAddr = fmt.Sprintf("127.0.0.1:%d", dnsPort)
	ts.controlPort = controlPort
	ts.rndcKeyFile = filepath.Join(dir, "rndc.key")
	ts.keysFile = filepath.Join(dir, "fedhost-keys.conf")
	ts.zonesDir = filepath.Join(dir, "zones")
	ts.pluginBinary = filepath.Join(dir, "fedhost-resource-rfc2136")
	if err := os.Mkdir(ts.zonesDir, 0o755); err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	if err := os.WriteFile(ts.rndcKeyFile, fmt.Appendf(nil, "key \"rndc-key\" {\n\talgorithm hmac-sha256;\n\tsecret %q;\n};\n", base64.StdEncoding.EncodeToString(secret)), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(ts.keysFile, nil, 0o640); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`include %q;
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
`, ts.rndcKeyFile, ts.keysFile, controlPort, dir, filepath.Join(dir, "named.pid"), dnsPort)
	confFile := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command("go", "build", "-o", ts.pluginBinary, ".").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	logPath := filepath.Join(dir, "named.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-g", "-c", confFile, "-4")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited, err := child.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	r, err := newRNDC("", "127.0.0.1", controlPort, ts.rndcKeyFile)
	if err != nil {
		stop()
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.run(ctx, "status")
		cancel()
		if err == nil {
			return stop, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("named exited at start:\n%s", child.Tail(logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("named's control channel did not answer within 20s: %v\n%s", err, child.Tail(logPath, 30))
		}
	}
}

// settingsJSON are the plugin settings for the test server.
func settingsJSON() []byte {
	ts := &testServer
	return fmt.Appendf(nil, `{"primary":%q,"nameservers":["ns1.provider.test","ns2.provider.test"],"rndc":{"address":"127.0.0.1","port":%d,"key_file":%q},"keys_file":%q,"zones_directory":%q,"wait_seconds":10}`,
		ts.dnsAddr, ts.controlPort, ts.rndcKeyFile, ts.keysFile, ts.zonesDir)
}

// namedLog is the end of named's log, for failures.
func namedLog() string {
	return strings.TrimSpace(child.Tail(filepath.Join(testServer.dir, "named.log"), 20))
}
