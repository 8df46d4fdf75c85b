package incustest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// The exec of this server follows incusd's cmd/incusd/instance_exec.go (execWs,
// instanceExecPost), the websocket mirrors of shared/ws (mirror.go, rwc.go), the
// exec wrapper of internal/linux/poll.go, the exit status of internal/linux/error.go
// and the operations' Connect and Cancel of internal/server/operations, as they are at
// lxc/incus be7afc5df39f089bc21e4f1d2e955fc6be8fae34; and doc/rest-api.md there
// (an operation's metadata.fds). It takes wait-for-websocket, non-interactive execs
// only; an interactive one (a PTY) or one without websockets (record-output) is
// refused.
//
// The command runs on this machine with os/exec, in the instance's directory (the
// server's dir/instances/<name>, the request's cwd below it), with the environment
// incusd gives it (the request's, then the instance's environment.* config, PATH, HOME,
// USER and LANG) and nothing of this process's. It is not in a container: it sees this
// machine's file system, not the instance's files.

// Stream numbers of incusd's execWs.
const (
	execControl = -1
	execStdin   = 0
	execStdout  = 1
	execStderr  = 2
)

// controlMessageMaxSize bounds a control message (ws.ControlMessageMaxSize).
const controlMessageMaxSize = 32 << 10

var upgrader = websocket.Upgrader{HandshakeTimeout: 5 * time.Second}

// execWs is one exec operation with websockets.
type execWs struct {
	s         *Server
	op        *operation
	in        *instance
	command   []string
	env       map[string]string
	cwd       string
	requestor string // the SHA-256 of the client certificate that asked for it

	mu       sync.Mutex
	conns    map[int]*websocket.Conn // nil until connected
	claimed  map[int]bool            // a connect is upgrading it: a second one is refused
	fds      map[int]string          // the secrets
	required chan struct{}           // closed when 0, 1 and 2 are connected
	control  chan struct{}           // closed when control is connected, or the command ended
	ctlOnce  sync.Once
	reqOnce  sync.Once
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func requestor(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return ""
	}
	sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
	return hex.EncodeToString(sum[:])
}

// execHandler follows instanceExecPost for wait-for-websocket: the instance must run,
// the environment is completed as incusd does, and the answer is a websocket operation
// whose metadata holds the streams' secrets (fds "0", "1", "2", "control"), the
// command, the environment and interactive. It is called with s.mu held.
func (s *Server) execHandler(w http.ResponseWriter, r *http.Request, in *instance) {
	var req struct {
		Command     []string          `json:"command"`
		Environment map[string]string `json:"environment"`
		Cwd         string            `json:"cwd"`
		WaitWS      bool              `json:"wait-for-websocket"`
		Record      bool              `json:"record-output"`
		Interactive bool              `json:"interactive"`
		User        uint32            `json:"user"`
		Group       uint32            `json:"group"`
		Width       int               `json:"width"`
		Height      int               `json:"height"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		errorResp(w, http.StatusBadRequest, err.Error())
		return
	}
	switch {
	case req.Record && req.WaitWS:
		errorResp(w, http.StatusBadRequest, `Cannot use "record-output" in combination with "wait-for-websocket"`)
		return
	case req.Interactive && req.Record:
		errorResp(w, http.StatusBadRequest, `Cannot use "interactive" in combination with "record-output"`)
		return
	case !in.Running:
		errorResp(w, http.StatusBadRequest, "Instance is not running")
		return
	case !req.WaitWS || req.Interactive:
		errorResp(w, http.StatusBadRequest, "incustest runs non-interactive commands with wait-for-websocket only")
		return
	case req.User != 0 || req.Group != 0:
		errorResp(w, http.StatusBadRequest, "incustest runs commands as the server's user only")
		return
	case len(req.Command) == 0:
		errorResp(w, http.StatusBadRequest, "No command given")
		return
	case req.Cwd != "" && !path.IsAbs(req.Cwd):
		errorResp(w, http.StatusBadRequest, "cwd must be an absolute path")
		return
	}
	env := req.Environment
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range in.Expanded {
		if n, ok := strings.CutPrefix(k, "environment."); ok {
			if _, set := env[n]; !set {
				env[n] = v
			}
		}
	}
	defaults := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root", "USER": "root"}
	for k, v := range defaults {
		if _, set := env[k]; !set {
			env[k] = v
		}
	}
	e := &execWs{s: s, in: in, command: req.Command, env: env, cwd: req.Cwd, requestor: requestor(r),
		conns:    map[int]*websocket.Conn{execControl: nil, execStdin: nil, execStdout: nil, execStderr: nil},
		claimed:  map[int]bool{},
		fds:      map[int]string{},
		required: make(chan struct{}), control: make(chan struct{})}
	fds := map[string]any{}
	for fd := range e.conns {
		e.fds[fd] = randomHex(32)
		name := fmt.Sprint(fd)
		if fd == execControl {
			name = "control"
		}
		fds[name] = e.fds[fd]
	}
	b := make([]byte, 16)
	rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	e.op = &operation{ID: id, Class: "websocket", Description: "Executing command", Status: "Running", StatusCode: 103,
		Metadata: map[string]any{"fds": fds, "command": req.Command, "environment": env, "interactive": false},
		onCancel: e.cancel, connect: e.connect, done: make(chan struct{})}
	s.ops[id] = e.op
	go e.do()
	w.Header().Set("Location", "/1.0/operations/"+id)
	writeJSON(w, http.StatusAccepted, map[string]any{"type": "async", "status": "Operation created", "status_code": 100,
		"operation": "/1.0/operations/" + id, "error_code": 0, "error": "", "metadata": e.op.json()})
}

// connectOperation follows operationWebsocketGet and Operation.Connect: only a running
// websocket operation can be connected. It is called without s.mu.
func (s *Server) connectOperation(w http.ResponseWriter, r *http.Request, op *operation) {
	s.mu.Lock()
	class, status, connect := op.Class, op.StatusCode, op.connect
	s.mu.Unlock()
	switch {
	case class != "websocket" || connect == nil:
		errorResp(w, http.StatusInternalServerError, "Only websocket operations can be connected")
	case status != 103:
		errorResp(w, http.StatusInternalServerError, "Only running operations can be connected")
	default:
		connect(w, r)
	}
}

// connect follows execWs.connect: the same requestor, a known secret, each stream once.
func (e *execWs) connect(w http.ResponseWriter, r *http.Request) {
	if requestor(r) != e.requestor {
		errorResp(w, http.StatusForbidden, "Requestor mismatch")
		return
	}
	secret := r.FormValue("secret")
	if secret == "" {
		errorResp(w, http.StatusInternalServerError, "missing secret")
		return
	}
	fd, found := 0, false
	for n, sec := range e.fds {
		if sec == secret {
			fd, found = n, true
		}
	}
	if !found {
		// A bad secret of an operation that exists: 403, not 404.
		errorResp(w, http.StatusForbidden, "permission denied")
		return
	}
	// The stream is claimed before the upgrade: a second connect that comes while the
	// first one upgrades is refused with an answer, not upgraded and then closed.
	e.mu.Lock()
	if e.conns[fd] != nil || e.claimed[fd] {
		e.mu.Unlock()
		errorResp(w, http.StatusInternalServerError, "Websocket number already connected")
		return
	}
	e.claimed[fd] = true
	e.mu.Unlock()
	conn, err := upgrader.Upgrade(w, r, nil)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		delete(e.claimed, fd) // the upgrader answered; the stream may be connected again
		return
	}
	e.conns[fd] = conn
	go keepalive(conn)
	if fd == execControl {
		e.ctlOnce.Do(func() { close(e.control) })
	}
	for n, c := range e.conns {
		// As incusd for a non-interactive wait-for-websocket exec: control is not
		// required.
		if n != execControl && c == nil {
			return
		}
	}
	e.reqOnce.Do(func() { close(e.required) })
}

// keepalive pings a websocket every 10 s until it closes, as incusd does.
func keepalive(conn *websocket.Conn) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		if err := conn.WriteControl(websocket.PingMessage, []byte("keepalive"), time.Now().Add(5*time.Second)); err != nil {
			return
		}
		<-t.C
	}
}

// cancel follows execWs.cancel (DELETE of the operation): it closes control, which
// makes the control handler kill the command. It is called with s.mu held.
func (e *execWs) cancel() {
	e.mu.Lock()
	c := e.conns[execControl]
	e.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

func (e *execWs) conn(fd int) *websocket.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conns[fd]
}

// finish ends the operation, unless it ended already (a DELETE cancelled it).
func (s *Server) finish(op *operation, err error, metadata map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if md, ok := op.Metadata.(map[string]any); ok {
		for k, v := range metadata {
			md[k] = v
		}
	}
	select {
	case <-op.done:
		return
	default:
	}
	if err != nil {
		op.Status, op.StatusCode, op.Err = "Failure", 400, err.Error()
	} else {
		op.Status, op.StatusCode = "Success", 200
	}
	close(op.done)
}

// do follows execWs.do for a non-interactive exec: it waits up to 10 s for stdin,
// stdout and stderr to be connected, runs the command on three pipes, mirrors them to
// the websockets, handles control, and puts the exit status in metadata.return.
func (e *execWs) do() {
	defer func() {
		e.mu.Lock()
		for _, c := range e.conns {
			if c != nil {
				c.Close()
			}
		}
		e.mu.Unlock()
	}()
	select {
	case <-e.required:
	case <-time.After(10 * time.Second):
		e.s.finish(e.op, errors.New("Timed out waiting for websockets to connect"), nil)
		return
	}
	var ttys, ptys [3]*os.File // ttys: the command's ends; ptys: the server's
	for i := range ttys {
		r, w, err := os.Pipe()
		if err != nil {
			e.s.finish(e.op, err, nil)
			return
		}
		if i == execStdin {
			ptys[i], ttys[i] = w, r
		} else {
			ptys[i], ttys[i] = r, w
		}
	}
	childDead, markChildDead := context.WithCancel(context.Background())
	defer markChildDead()
	var wgEOF sync.WaitGroup
	finisher := func(code int, cmdErr error) {
		markChildDead()
		for _, f := range ttys {
			f.Close()
		}
		if c := e.conn(execControl); c == nil {
			e.ctlOnce.Do(func() { close(e.control) })
		} else {
			c.Close()
		}
		wgEOF.Wait()
		for _, f := range ptys {
			f.Close()
		}
		e.s.finish(e.op, cmdErr, map[string]any{"return": code})
	}

	// What forkexec does with a command it cannot find or run: it exits 127 or 126.
	var proc *os.Process
	wait := func() (int, error) { return 127, nil }
	cmd, err := e.start(ttys)
	switch {
	case err == nil:
		proc = cmd.Process
		wait = func() (int, error) { return exitStatus(cmd.Wait()) }
		e.s.mu.Lock()
		e.in.execs = append(e.in.execs, proc)
		e.s.mu.Unlock()
		defer func() {
			e.s.mu.Lock()
			defer e.s.mu.Unlock()
			for i, p := range e.in.execs {
				if p == proc {
					e.in.execs = append(e.in.execs[:i], e.in.execs[i+1:]...)
					break
				}
			}
		}()
	case !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist):
		wait = func() (int, error) { return 126, nil }
	}
	for _, f := range ttys {
		f.Close() // the command has them now
	}
	signal := func(sig os.Signal) {
		if proc != nil {
			proc.Signal(sig)
		}
	}
	var killOnce sync.Once
	kill := func() { killOnce.Do(func() { signal(syscall.SIGKILL) }) }

	// The control handler: signals, and a kill when control closes while the command runs.
	wgEOF.Add(1)
	go func() {
		defer wgEOF.Done()
		<-e.control
		conn := e.conn(execControl)
		if conn == nil {
			return
		}
		conn.SetReadLimit(controlMessageMaxSize)
		for {
			mt, r, err := conn.NextReader()
			if err != nil || mt == websocket.CloseMessage {
				if childDead.Err() == nil {
					kill()
				}
				return
			}
			buf, err := io.ReadAll(r)
			if err != nil {
				if childDead.Err() == nil {
					kill()
				}
				return
			}
			var msg struct {
				Command string            `json:"command"`
				Args    map[string]string `json:"args"`
				Signal  int               `json:"signal"`
			}
			if json.Unmarshal(buf, &msg) != nil {
				continue
			}
			if msg.Command == "signal" {
				signal(syscall.Signal(msg.Signal))
			}
		}
	}()

	wgEOF.Add(2)
	for _, i := range []int{execStdin, execStdout, execStderr} {
		conn := e.conn(i)
		switch i {
		case execStdin:
			go func() {
				mirrorWrite(conn, ptys[execStdin])
				ptys[execStdin].Close()
			}()
		case execStdout:
			// A read on stdout is the client gone; without control, the command is
			// killed.
			go func() {
				conn.ReadMessage()
				select {
				case <-e.control:
				default:
					kill()
				}
			}()
			go func() { defer wgEOF.Done(); mirrorRead(conn, childDead, ptys[i]) }()
		case execStderr:
			go func() { conn.ReadMessage() }()
			go func() { defer wgEOF.Done(); mirrorRead(conn, childDead, ptys[i]) }()
		}
	}

	code, werr := wait()
	switch code {
	case 127:
		werr = errors.New("Command not found")
	case 126:
		werr = errors.New("Command not executable")
	}
	finisher(code, werr)
}

// start starts the command as the instance's process: in the instance's directory,
// with the exec's environment only, its binary looked up in that environment's PATH.
func (e *execWs) start(ttys [3]*os.File) (*exec.Cmd, error) {
	e.s.mu.Lock()
	root := e.s.instanceDir(e.in.Name)
	e.s.mu.Unlock()
	dir := filepath.Join(root, filepath.FromSlash(path.Clean("/"+e.cwd)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bin := e.command[0]
	if !strings.Contains(bin, "/") {
		bin = ""
		for _, d := range filepath.SplitList(e.env["PATH"]) {
			p := filepath.Join(d, e.command[0])
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				bin = p
				break
			}
		}
		if bin == "" {
			return nil, exec.ErrNotFound
		}
	}
	env := make([]string, 0, len(e.env))
	for k, v := range e.env {
		env = append(env, k+"="+v)
	}
	cmd := &exec.Cmd{Path: bin, Args: e.command, Env: env, Dir: dir, Stdin: ttys[execStdin], Stdout: ttys[execStdout], Stderr: ttys[execStderr]}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// instanceDir is the directory on this machine an instance's commands run in.
func (s *Server) instanceDir(name string) string {
	return filepath.Join(s.dir, "instances", name)
}

// exitStatus follows linux.ExitStatus: 128+N for a command killed by signal N.
func exitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return 128 + int(st.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return -1, err
}

// mirrorWrite follows ws.MirrorWrite: a websocket's binary messages are written to w
// until an empty text message (the barrier), a close message or the connection's end.
func mirrorWrite(conn *websocket.Conn, w io.Writer) {
	for {
		mt, r, err := conn.NextReader()
		if err != nil || mt == websocket.CloseMessage || mt == websocket.TextMessage {
			return
		}
		if _, err := io.Copy(w, r); err != nil {
			return
		}
	}
}

// mirrorRead follows ws.MirrorRead over linux.NewExecWrapper: what the command writes
// goes out as binary messages, then the barrier. Once the command has ended, what is
// still written within a second is sent and the stream then ends, so that a process it
// left running with the pipe open does not hold the exec open.
func mirrorRead(conn *websocket.Conn, childDead context.Context, f *os.File) {
	go func() {
		<-childDead.Done()
		f.SetReadDeadline(time.Now().Add(time.Second))
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if werr := conn.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	conn.WriteMessage(websocket.TextMessage, []byte{})
}

// cancelOperation follows DELETE /1.0/operations/<id> (Operation.Cancel): an
// operation that has ended, or cannot be cancelled, is refused. It is called with s.mu
// held.
func (s *Server) cancelOperation(w http.ResponseWriter, op *operation) {
	select {
	case <-op.done:
		errorResp(w, http.StatusBadRequest, "Only running operations can be cancelled")
		return
	default:
	}
	if op.onCancel == nil {
		errorResp(w, http.StatusBadRequest, "This operation can't be cancelled")
		return
	}
	op.onCancel()
	op.Status, op.StatusCode = "Cancelled", 401
	close(op.done)
	syncResp(w, map[string]any{})
}
