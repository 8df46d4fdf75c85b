package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/sdk"
)

// The managed gateway lives in <data dir>/versitygw:
//
//	root.json      the generated root credentials, 0600
//	port           the TCP port chosen at the first start, on 127.0.0.1
//	data/          the posix backend: a directory per bucket
//	iam/           the internal IAM file (users.json)
//	versitygw.log  the gateway's output
const (
	managedDirName = "versitygw"
	rootFile       = "root.json"
	portFile       = "port"
	logFileName    = "versitygw.log"
	healthPath     = "/health"
	readyTimeout   = 30 * time.Second
	stopTimeout    = 10 * time.Second
)

// managedGateway is a versitygw process the plugin runs as its child.
type managedGateway struct {
	dir, binary string
	port        int
	creds       aws.Credentials
	cmd         *exec.Cmd
	exited      <-chan struct{}
	stopOnce    sync.Once
}

type rootCredentials struct {
	Access string `json:"access"`
	Secret string `json:"secret"`
}

func (p *provider) configureManaged(ctx context.Context, s settings, creds *aws.Credentials) error {
	switch {
	case s.Endpoint != "":
		return sdk.Invalid("settings/endpoint", "managed runs the plugin's own gateway, which takes no endpoint: drop managed or the endpoint")
	case s.AdminEndpoint != "":
		return sdk.Invalid("settings/admin_endpoint", "the managed gateway serves its admin API on its S3 port: drop admin_endpoint")
	}
	dataDir := sdk.DataDir()
	if dataDir == "" {
		return sdk.Invalid("settings/managed", "the managed gateway lives in the plugin's data dir, and the host gave none (%s): set endpoint to use a shared gateway instead", sdk.DataDirEnv)
	}
	binary, err := findBinary(s.Binary)
	if err != nil {
		return err
	}
	dir := filepath.Join(dataDir, managedDirName)
	p.mu.Lock()
	m := p.managed
	p.mu.Unlock()
	if m == nil || m.dir != dir || m.binary != binary || !m.running() || (creds != nil && *creds != m.creds) {
		if m != nil {
			m.stop()
		}
		if m, err = startManaged(ctx, dir, binary, s.Region, creds); err != nil {
			return err
		}
	}
	public := s.PublicEndpoint
	if public == "" {
		public = m.endpoint()
	}
	gw, err := newGateway(m.endpoint(), "", public, s.Region, m.creds)
	if err != nil {
		m.stop()
		return err
	}
	if err := gw.check(ctx); err != nil {
		m.stop()
		return err
	}
	p.swap(gw, m)
	return nil
}

// findBinary finds versitygw: the setting, else bin/artifacts/versitygw beside the
// plugin directory (the plugin is bin/plugins/fedhost-resource-versitygw), else PATH.
func findBinary(setting string) (string, error) {
	if setting != "" {
		if !isExecutable(setting) {
			return "", sdk.Invalid("settings/binary", "%s is not an executable file", setting)
		}
		return setting, nil
	}
	if exe, err := os.Executable(); err == nil {
		candidate := filepath.Join(filepath.Dir(exe), "..", "artifacts", "versitygw")
		if isExecutable(candidate) {
			return filepath.Clean(candidate), nil
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", sdk.Invalid("settings/managed", "the versitygw executable is not in bin/artifacts beside the plugin directory nor in PATH: build it with `go build -o bin/artifacts/versitygw github.com/versity/versitygw/cmd/versitygw` (make build does) or set binary")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func (m *managedGateway) endpoint() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port))
}

// startManaged prepares dir on first use and starts the gateway in it.
func startManaged(ctx context.Context, dir, binary, region string, creds *aws.Credentials) (*managedGateway, error) {
	for _, sub := range []string{dir, filepath.Join(dir, "data"), filepath.Join(dir, "iam")} {
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return nil, fmt.Errorf("preparing the managed gateway directory: %w", err)
		}
	}
	m := &managedGateway{dir: dir, binary: binary}
	if creds != nil {
		m.creds = *creds
	} else {
		root, err := loadRoot(filepath.Join(dir, rootFile))
		if err != nil {
			return nil, err
		}
		m.creds = aws.Credentials{AccessKeyID: root.Access, SecretAccessKey: root.Secret, Source: "managed gateway"}
	}
	if b, err := os.ReadFile(filepath.Join(dir, portFile)); err == nil {
		if m.port, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return nil, fmt.Errorf("%s does not hold a port number: remove it to have a new port chosen", filepath.Join(dir, portFile))
		}
	}
	firstStart := m.port == 0
	var err error
	// A new port can be taken before the gateway binds it, and the gateway of a previous
	// run can still hold the recorded one for a moment: try a few times.
	for attempt := 1; ; attempt++ {
		if firstStart {
			if m.port, err = child.FreePort(); err != nil {
				return nil, err
			}
		}
		if err = m.run(ctx, region); err == nil || attempt == 3 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return nil, err
	}
	if firstStart {
		if err := os.WriteFile(filepath.Join(dir, portFile), []byte(strconv.Itoa(m.port)+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	hclog.Default().Info("managed versitygw started", "dir", dir, "endpoint", m.endpoint(), "pid", m.cmd.Process.Pid)
	return m, nil
}

// loadRoot reads the root credentials, generating them on first use.
func loadRoot(path string) (rootCredentials, error) {
	var root rootCredentials
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		root = rootCredentials{Access: "fedhost-root", Secret: newSecret()}
		b, _ = json.Marshal(root)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return root, fmt.Errorf("writing the root credentials of the managed gateway: %w", err)
		}
		return root, nil
	}
	if err != nil {
		return root, fmt.Errorf("reading the root credentials of the managed gateway: %w", err)
	}
	if err := json.Unmarshal(b, &root); err != nil || root.Access == "" || root.Secret == "" {
		return root, fmt.Errorf("%s does not hold root credentials ({\"access\": ..., \"secret\": ...})", path)
	}
	return root, nil
}

// run starts the gateway as a child of the plugin and waits until it answers its health
// check.
func (m *managedGateway) run(ctx context.Context, region string) error {
	logPath := filepath.Join(m.dir, logFileName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the gateway log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(m.binary,
		"--port", net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)),
		"--iam-dir", filepath.Join(m.dir, "iam"),
		"--health", healthPath,
		"--region", region,
		"posix", filepath.Join(m.dir, "data"),
	)
	// The root credentials go through the environment, which other users cannot read,
	// and not the command line, which they can.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+m.creds.AccessKeyID, "ROOT_SECRET_ACCESS_KEY="+m.creds.SecretAccessKey)
	cmd.Dir = m.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	exited, err := child.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", m.binary, err)
	}
	m.cmd, m.exited = cmd, exited
	if err := m.waitReady(ctx); err != nil {
		m.stop()
		return fmt.Errorf("%w\nlast lines of %s:\n%s", err, logPath, child.Tail(logPath, 20))
	}
	return nil
}

func (m *managedGateway) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(m.endpoint() + healthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		switch {
		case !m.running():
			return fmt.Errorf("the managed gateway in %s exited during startup", m.dir)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("the managed gateway in %s does not answer %s on port %d after %v", m.dir, healthPath, m.port, readyTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *managedGateway) running() bool {
	if m.exited == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// stop asks the gateway to end (SIGTERM), then kills it if it does not in time.
func (m *managedGateway) stop() {
	m.stopOnce.Do(func() {
		if !m.running() {
			return
		}
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(stopTimeout):
			hclog.Default().Warn("the managed gateway did not stop in time: killing it", "pid", m.cmd.Process.Pid)
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
		hclog.Default().Info("managed versitygw stopped", "dir", m.dir)
	})
}
