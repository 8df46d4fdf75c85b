// Package pgtest runs a real PostgreSQL server for tests.
//
// One server is started lazily per test binary, from the PostgreSQL binaries
// installed on the machine, in a temporary directory, listening only on
// 127.0.0.1. Each call to DSN creates a fresh, empty database on it, so tests
// can run in parallel without sharing state:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.DSN(t) // postgres://...@127.0.0.1:port/db?sslmode=disable
//		...
//	}
//
// The server is a direct child of the test process and is killed with it, so
// an interrupted test run never leaves a server behind. Main also stops it and
// removes its directory when the tests are done.
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fedhost/fedhost/internal/child"
)

// superuser is the role initdb creates; every test database is owned by it.
const superuser = "pgtest"

var (
	startOnce sync.Once
	shared    *server
	startErr  error
	dbCounter atomic.Int64
)

// Main runs the tests of m, then stops the shared server (if a test started
// it) and removes its directory. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the shared server, if a test started it, and removes its directory: for a
// TestMain that runs m itself (one that also starts another server, say).
func Stop() {
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
}

// DSN returns the address of a new, empty database owned by a superuser role,
// on the server shared by the whole test binary, starting that server on first
// use. It fails the test if PostgreSQL cannot be started, naming what to
// install when its binaries are missing.
func DSN(t testing.TB) string {
	t.Helper()
	startOnce.Do(func() { shared, startErr = start() })
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	return shared.newDatabase(t)
}

// Server is a PostgreSQL server of one test's own, which the test may stop and start
// again under its clients: the shared server of DSN must not be.
type Server struct {
	t testing.TB
	s *server
}

// NewServer starts a server of the test's own, stopped and removed when the test ends.
// Unlike the shared server, it answers a commit only once its WAL is written, so that
// what a client was told is committed survives Stop.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := startServer(true)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return &Server{t: t, s: s}
}

// DSN returns the address of a new, empty database on the server, as DSN does.
func (srv *Server) DSN() string {
	srv.t.Helper()
	return srv.s.newDatabase(srv.t)
}

// Stop stops the server as a crash would (immediate shutdown: every connection is cut,
// nothing is checkpointed); its data stays for Start.
func (srv *Server) Stop() { srv.s.kill() }

// Start starts the stopped server again on the same port and data, and returns once it
// accepts connections; it fails the test if it cannot.
func (srv *Server) Start() {
	srv.t.Helper()
	if err := srv.s.run(srv.s.bin, srv.s.cred, srv.s.port); err != nil {
		srv.t.Fatalf("pgtest: starting the server again: %v", err)
	}
}

// newDatabase creates a new, empty database on s and returns its address.
func (s *server) newDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", dbCounter.Add(1), dbNameSuffix(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connecting to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	return s.dsn(name)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// dbNameSuffix makes a test name readable in the server's logs while keeping
// the database name within PostgreSQL's 63-byte limit.
func dbNameSuffix(testName string) string {
	s := unsafeName.ReplaceAllString(strings.ToLower(testName), "_")
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	return strings.Trim(s, "_")
}

type server struct {
	dir      string
	port     int
	password string
	// bin and cred are the binaries' directory and the user the postmaster runs as.
	bin  string
	cred *syscall.Credential
	// durable servers keep every answered commit across a crash (Server.Stop); the
	// shared one is faster without.
	durable bool
	cmd     *exec.Cmd
	exited  <-chan struct{} // closed when the postmaster has exited
}

func (s *server) dsn(database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.password, s.port, database)
}

func start() (*server, error) { return startServer(false) }

func startServer(durable bool) (*server, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("creating the server directory: %w", err)
	}
	s := &server{dir: dir, password: rand.Text(), bin: bin, cred: cred, durable: durable}
	if err := s.initdb(bin, cred, uid, gid); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A free port can be taken by someone else between our probe and the
	// postmaster's bind, so try a few.
	for attempt := 0; ; attempt++ {
		err = s.run(bin, cred, 0)
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// findBinDir looks for initdb and postgres where Debian and most distributions
// put them.
func findBinDir() (string, error) {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(versioned) - 1; i >= 0; i-- { // newest version first
		candidates = append(candidates, versioned[i])
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found in `pg_config --bindir`, /usr/lib/postgresql/*/bin or PATH: install them (Debian: apt-get install postgresql)")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// credential returns who initdb and postgres run as: PostgreSQL refuses to run
// as root, so under root they run as the postgres system user, or nobody.
func credential() (cred *syscall.Credential, uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		if u, err = user.Lookup("nobody"); err != nil {
			return nil, 0, 0, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

func (s *server) initdb(bin string, cred *syscall.Credential, uid, gid int) error {
	if cred != nil {
		if err := reachable(s.dir, uid, gid); err != nil {
			return err
		}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return fmt.Errorf("handing %s to uid %d: %w", s.dir, uid, err)
		}
	}
	pwfile := filepath.Join(s.dir, "password")
	if err := os.WriteFile(pwfile, []byte(s.password+"\n"), 0o600); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(pwfile, uid, gid); err != nil {
			return err
		}
	}
	cmd := exec.Command(filepath.Join(bin, "initdb"),
		"--pgdata", filepath.Join(s.dir, "data"),
		"--username", superuser,
		"--pwfile", pwfile,
		"--auth", "scram-sha-256",
		"--encoding", "UTF8",
		"--locale", "C",
		"--no-sync",
	)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	os.Remove(pwfile)
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// reachable checks that every parent of dir can be traversed by uid/gid,
// which a root-owned 0700 TMPDIR (or t.TempDir's parents) would prevent.
func reachable(dir string, uid, gid int) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0 ||
			(int(st.Uid) == uid && mode&0o100 != 0) ||
			(int(st.Gid) == gid && mode&0o010 != 0)
		if !ok {
			return fmt.Errorf("PostgreSQL runs as uid %d, which cannot enter %s (mode %v): set TMPDIR to a directory it can reach, such as /tmp", uid, p, mode)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// run starts the postmaster as a direct child that the kernel kills when the
// test process dies, and waits until it accepts connections.
// run starts the postmaster on port, or on a free one if port is 0.
func (s *server) run(bin string, cred *syscall.Credential, port int) error {
	if port == 0 {
		var err error
		if port, err = child.FreePort(); err != nil {
			return err
		}
	}
	s.port = port
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()

	args := []string{
		"-D", filepath.Join(s.dir, "data"),
		"-h", "127.0.0.1",
		"-p", strconv.Itoa(port),
		"-k", s.dir,
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
	}
	if !s.durable {
		// A commit is answered before its WAL is written: lost if the server crashes,
		// which only a Server's Stop does.
		args = append(args, "-c", "synchronous_commit=off")
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	exited, err := child.Start(s.cmd)
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	s.exited = exited

	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.dsn("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited during startup:\n%s", child.Tail(logPath, 40))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("postgres did not accept connections within 30s: %v\n%s", err, child.Tail(logPath, 40))
		}
	}
}

// kill does what `pg_ctl stop -m immediate` does: SIGQUIT to the postmaster,
// which ends every backend at once. Nothing needs to survive a test server.
func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *server) stop() error {
	s.kill()
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("removing %s: %w", s.dir, err)
	}
	return nil
}
