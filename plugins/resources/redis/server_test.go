package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/plugintest"
)

// testServer is the redis-server every test of this binary shares: started by TestMain
// on 127.0.0.1, from a config file in a temp dir, with an admin ACL user.
var testServer struct {
	addr, adminPassword, passwordFile, configFile, pluginBinary string
}

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.MainWithServer(m, "redis", startRedis)
}

// startRedis starts redis-server as a child killed with the test process (Pdeathsig),
// and waits until the admin user can log in.
func startRedis(dir string) (stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed: apt-get install redis-server (Debian package redis-server)")
	}
	port, err := child.FreePort()
	if err != nil {
		return nil, err
	}
	pw := make([]byte, 16)
	rand.Read(pw)
	testServer.addr = fmt.Sprintf("127.0.0.1:%d", port)
	testServer.adminPassword = hex.EncodeToString(pw)
	testServer.passwordFile = filepath.Join(dir, "admin-password")
	testServer.configFile = filepath.Join(dir, "redis.conf")
	testServer.pluginBinary = filepath.Join(dir, "fedhost-resource-redis")
	if err := os.WriteFile(testServer.passwordFile, []byte(testServer.adminPassword+"\n"), 0o600); err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		fmt.Sprintf("port %d", port),
		"bind 127.0.0.1",
		`save ""`,
		"appendonly no",
		"dir " + dir,
		"logfile " + filepath.Join(dir, "redis.log"),
		"user default off",
		"user admin on >" + testServer.adminPassword + " ~* &* +@all",
	}, "\n") + "\n"
	if err := os.WriteFile(testServer.configFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	if out, err := exec.Command("go", "build", "-o", testServer.pluginBinary, ".").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, testServer.configFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited, err := child.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	admin := adminClient()
	defer admin.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := admin.Ping(ctx).Err()
		cancel()
		if err == nil {
			return stop, nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("redis-server exited at start:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("redis-server did not answer within 20s: %v", err)
		}
	}
}

func adminClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: testServer.addr, Username: "admin", Password: testServer.adminPassword, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
}

func userClient(addr, user, password string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
}

// settingsJSON are the plugin settings for the test server.
func settingsJSON() []byte {
	return fmt.Appendf(nil, `{"address":%q,"username":"admin","password_file":%q}`, testServer.addr, testServer.passwordFile)
}
