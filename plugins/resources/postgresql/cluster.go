package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/sdk"
)

// The managed cluster lives in <data dir>/cluster:
//
//	superuser.password  the password of the superuser role, 0600
//	port                the TCP port chosen at the first start, on 127.0.0.1
//	data/               PGDATA
//	postgres.log        the server's log
//	.s.PGSQL.<port>     the unix socket
const (
	superuser    = "fedhost"
	passwordFile = "superuser.password"
	portFile     = "port"
	logFileName  = "postgres.log"
	// readyTimeout bounds how long a start (with crash recovery) may take.
	readyTimeout = 2 * time.Minute
	// stopTimeout bounds a fast shutdown before the plugin gives up waiting.
	stopTimeout = time.Minute
)

// cluster is a PostgreSQL cluster the plugin runs as its child.
type cluster struct {
	dir      string
	port     int
	password string
	pid      int
	// exited is closed when the postmaster has exited; it is nil for a postmaster of a
	// previous run that the plugin adopted, which it can only poll.
	exited   <-chan struct{}
	stopOnce sync.Once
}

// configureManaged starts (or keeps) the managed cluster and provisions on it.
func (p *provider) configureManaged(ctx context.Context, s settings, allowed []string) error {
	switch {
	case s.Host != "":
		return sdk.Invalid("settings/host", "the managed cluster listens on 127.0.0.1 only: host is for a shared server (url)")
	case s.Port != 0:
		return sdk.Invalid("settings/port", "the managed cluster chooses its own port: port is for a shared server (url)")
	case s.SSLMode != "" && s.SSLMode != "disable":
		return sdk.Invalid("settings/sslmode", "the managed cluster listens on loopback without TLS: sslmode can only be disable")
	}
	dataDir := sdk.DataDir()
	if dataDir == "" {
		return sdk.Invalid("settings/managed", "the managed cluster lives in the plugin's data dir, and the host gave none (%s): set url to use a shared server instead", sdk.DataDirEnv)
	}
	dir := filepath.Join(dataDir, "cluster")
	p.mu.Lock()
	cl := p.cluster
	p.mu.Unlock()
	if cl == nil || cl.dir != dir || !cl.running() {
		var err error
		if cl, err = startCluster(ctx, dir, s.BinDir); err != nil {
			return err
		}
	}
	srv, err := newServer(cl.dsn(), "127.0.0.1", cl.port, "disable")
	if err != nil {
		return err
	}
	p.swap(srv, cl, allowed)
	return nil
}

func (c *cluster) dsn() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

func (c *cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// startCluster initialises the cluster in dir on first use, then adopts the postmaster
// of a previous run if it still runs, or starts one.
func startCluster(ctx context.Context, dir, binDir string) (*cluster, error) {
	log := hclog.Default()
	bin, err := findBinDir(binDir)
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(dir, ".s.PGSQL.65535")
	if len(socket) > 107 {
		return nil, sdk.Invalid("settings/managed", "the unix socket %s would be longer than the 107 bytes Linux allows: give the plugin a shorter data dir", socket)
	}
	owner, err := runAs()
	if err != nil {
		return nil, err
	}
	if err := owner.prepare(dir); err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	if c.password, err = owner.secretFile(filepath.Join(dir, passwordFile)); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, portFile)); err == nil {
		if c.port, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return nil, fmt.Errorf("%s does not hold a port number: remove it to have a new port chosen", filepath.Join(dir, portFile))
		}
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		log.Info("initialising the managed PostgreSQL cluster", "dir", dir)
		if err := c.initdb(ctx, bin, owner); err != nil {
			return nil, err
		}
	}
	if adopted, err := c.adopt(ctx); adopted || err != nil {
		return c, err
	}
	// The first start chooses a free port; another process can take it before the
	// postmaster binds it, so try a few.
	firstStart := c.port == 0
	for attempt := 1; ; attempt++ {
		if firstStart {
			if c.port, err = child.FreePort(); err != nil {
				return nil, err
			}
		}
		err = c.run(ctx, bin, owner)
		if err == nil || !firstStart || attempt == 3 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if firstStart {
		if err := owner.writeFile(filepath.Join(dir, portFile), []byte(strconv.Itoa(c.port)+"\n")); err != nil {
			return nil, err
		}
	}
	log.Info("managed PostgreSQL cluster started", "dir", dir, "port", c.port, "pid", c.pid)
	return c, nil
}

// findBinDir finds initdb and postgres: bin_dir, else where Debian and most
// distributions put them.
func findBinDir(binDir string) (string, error) {
	candidates := []string{binDir}
	if binDir == "" {
		candidates = nil
		if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
			candidates = append(candidates, strings.TrimSpace(string(out)))
		}
		versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		for i := len(versioned) - 1; i >= 0; i-- { // the newest version first
			candidates = append(candidates, versioned[i])
		}
		if p, err := exec.LookPath("postgres"); err == nil {
			candidates = append(candidates, filepath.Dir(p))
		}
	}
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	if binDir != "" {
		return "", sdk.Invalid("settings/bin_dir", "%s holds no initdb and postgres executables", binDir)
	}
	return "", sdk.Invalid("settings/managed", "the PostgreSQL server binaries (initdb, postgres) are not in `pg_config --bindir`, /usr/lib/postgresql/*/bin or PATH: install them (Debian: apt-get install postgresql) or set bin_dir")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func (c *cluster) initdb(ctx context.Context, bin string, owner *osUser) error {
	// A data dir without PG_VERSION is what a failed initdb left; initdb needs it gone.
	if err := os.RemoveAll(c.dataDir()); err != nil {
		return fmt.Errorf("removing the unfinished cluster %s: %w", c.dataDir(), err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"--pgdata", c.dataDir(),
		"--username", superuser,
		"--pwfile", filepath.Join(c.dir, passwordFile),
		"--auth", "scram-sha-256",
		"--encoding", "UTF8",
		"--locale", "C.UTF-8",
		"--no-instructions",
	)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner.credential()}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb of the managed cluster in %s: %w\n%s", c.dataDir(), err, bytes.TrimSpace(out))
	}
	return nil
}

// adopt takes over the postmaster of a previous run when its postmaster.pid names a live
// postgres process, waiting until it accepts connections. A stale postmaster.pid is
// removed, so the postmaster started next does not mistake a reused pid for a rival.
func (c *cluster) adopt(ctx context.Context) (bool, error) {
	pidFile := filepath.Join(c.dataDir(), "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if pid <= 0 || !isPostgres(pid) {
		hclog.Default().Info("removing the stale postmaster.pid of a previous run", "pid", pid)
		return false, os.Remove(pidFile)
	}
	c.pid = pid
	hclog.Default().Info("adopting the running postmaster of a previous run", "pid", pid, "port", c.port)
	if err := c.waitReady(ctx, func() bool { return !isPostgres(pid) }); err != nil {
		if !isPostgres(pid) {
			// It was shutting down: start afresh.
			c.pid = 0
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// isPostgres reports whether pid is a live process running postgres: a zombie is gone.
func isPostgres(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || len(s) < end+3 {
		return false
	}
	return s[open+1:end] == "postgres" && s[end+2] != 'Z'
}

// run starts the postmaster as a child of the plugin and waits until it accepts
// connections.
func (c *cluster) run(ctx context.Context, bin string, owner *osUser) error {
	logPath := filepath.Join(c.dir, logFileName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the cluster log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", c.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-p", strconv.Itoa(c.port),
		"-k", c.dir,
	)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// SIGINT is a fast shutdown: when the plugin dies the server ends its sessions and
	// stops cleanly. Its own process group keeps a terminal's ^C off it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner.credential(), Pdeathsig: syscall.SIGINT, Setpgid: true}
	exited, err := child.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	c.pid, c.exited = cmd.Process.Pid, exited
	gone := func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	}
	if err := c.waitReady(ctx, gone); err != nil {
		if !gone() {
			c.stop()
		}
		return fmt.Errorf("%w\nlast lines of %s:\n%s", err, logPath, child.Tail(logPath, 40))
	}
	return nil
}

// waitReady polls until the cluster accepts the superuser, or gone reports the
// postmaster has exited.
func (c *cluster) waitReady(ctx context.Context, gone func() bool) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attempt, c.dsn())
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		switch {
		case gone():
			return fmt.Errorf("the managed cluster in %s exited during startup", c.dir)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("the managed cluster in %s does not accept connections on port %d after %v: %s", c.dir, c.port, readyTimeout, redact(err.Error(), c.password))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// running reports whether the postmaster is still there.
func (c *cluster) running() bool {
	if c.exited != nil {
		select {
		case <-c.exited:
			return false
		default:
			return true
		}
	}
	return c.pid > 0 && isPostgres(c.pid)
}

// stop asks the postmaster for a fast shutdown (SIGINT: sessions end, a checkpoint is
// written) and waits for it to exit.
func (c *cluster) stop() {
	c.stopOnce.Do(func() {
		if c.pid <= 0 || !c.running() {
			return
		}
		log := hclog.Default()
		if err := syscall.Kill(c.pid, syscall.SIGINT); err != nil {
			log.Warn("stopping the managed cluster", "pid", c.pid, "error", err)
			return
		}
		deadline := time.Now().Add(stopTimeout)
		for c.running() {
			if time.Now().After(deadline) {
				log.Warn("the managed cluster did not stop in time", "pid", c.pid, "timeout", stopTimeout)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		log.Info("managed PostgreSQL cluster stopped", "dir", c.dir)
	})
}

// newPassword is the superuser's password: 26 characters of crypto/rand base32.
func newPassword() string { return rand.Text() }
