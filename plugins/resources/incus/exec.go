package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// The exec call in the websocket form of the Incus API (doc/rest-api.md and incusd's
// cmd/incusd/instance_exec.go at lxc/incus be7afc5df3): POST /1.0/instances/<name>/exec
// with wait-for-websocket answers a "websocket" operation whose metadata.fds holds one
// secret per stream ("0" stdin, "1" stdout, "2" stderr) and one for "control"; each is
// GET /1.0/operations/<id>/websocket?secret=<secret>. incusd starts the command once 0,
// 1 and 2 are connected, sends each output stream as binary messages and then an empty
// text message (its "barrier", the stream's end), takes an empty text message on 0 as
// the end of stdin, forwards {"command": "signal", "signal": N} on control to the
// command's process, kills it when control closes, and puts the exit status in the
// operation's metadata.return (128+N for a signal) when the command ends.
const (
	// execChunk is the most output one ExecOutput carries.
	execChunk = 32 << 10
	// execGrace is how long a stopped command has between the SIGTERM and the SIGKILL the
	// driver sends on control. The wrapper in the instance kills the command's process
	// group itself wrapperGrace after the SIGTERM, so the SIGKILL (which only reaches the
	// wrapper) is the fallback for a wrapper that did not end.
	execGrace = 5 * time.Second
	// execKillWait is how long the driver then waits for the operation to end before it
	// closes control (incusd kills the command with SIGKILL) and deletes the operation.
	execKillWait = 5 * time.Second
	// execDialTimeout bounds each websocket handshake.
	execDialTimeout = 10 * time.Second
)

// execWrapper runs as /bin/sh -c execWrapper sh BINARY ARGS... in the instance. Incus
// signals one process, the one it started: this wrapper. It runs the command in a
// session (and process group) of its own with setsid (util-linux or busybox; without it
// the command runs in the wrapper's group and only it is signalled), with the wrapper's
// stdin; a SIGTERM is passed to the whole group, which is killed 3 s later (30 × 0.1 s)
// unless the command has ended by then; when the command ends, what it left running in
// its group is killed; the wrapper exits with the command's status. A SIGTERM that comes
// before the command's pid is known (the shell runs a trap after the command that
// started it, before c=$!, and the command may have printed by then) stops it once c is
// set. It writes nothing (its own stderr is /dev/null once the command started: bash
// reports a killed job).
const execWrapper = `c= t=
alive() {
	read -r s 2>/dev/null <"/proc/$c/stat" || return 1
	s=${s##*) }
	[ "${s%% *}" != Z ]
}
stop() {
	if [ -z "$c" ]; then t=1; return; fi
	kill -TERM -"$c" 2>/dev/null || kill -TERM "$c" 2>/dev/null
	n=0
	while [ "$n" -lt 30 ] && alive; do sleep 0.1; n=$((n+1)); done
	kill -KILL -"$c" 2>/dev/null || kill -KILL "$c" 2>/dev/null
}
trap stop TERM
exec 3<&0
[ -z "$t" ] || exit 143
if command -v setsid >/dev/null 2>&1; then setsid "$@" <&3 3<&- & else "$@" <&3 3<&- & fi
c=$!
[ -z "$t" ] || stop
exec 3<&- 2>/dev/null
while :; do
	wait "$c"; r=$?
	kill -0 "$c" 2>/dev/null || break
done
kill -KILL -"$c" 2>/dev/null
exit "$r"`

// execMetadata is the metadata of an exec operation: the websockets' secrets while it
// runs, the exit status once it ended.
type execMetadata struct {
	FDs    map[string]string `json:"fds"`
	Return *int              `json:"return"`
}

// execFDs are the websockets of an exec in the order the driver connects them: control
// first, as the incus client does, so that it is there before the command starts.
var execFDs = []string{"control", "0", "1", "2"}

// Exec runs a command in the node's instance through the websocket form of
// POST /1.0/instances/<name>/exec: its output is passed on while it runs, its stdin is
// sent and then closed, a timeout or a cancel sends SIGTERM and then SIGKILL on the
// control websocket, and the exit status is the operation's metadata.return.
func (p *provider) Exec(ctx context.Context, req resource.ExecRequest, output func(resource.ExecOutput) error) (resource.ExecResult, error) {
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return resource.ExecResult{}, err
	}
	if req.Binary == "" {
		return resource.ExecResult{}, sdk.Invalid("binary", "the incus driver runs a named command only: give the binary to run")
	}
	if req.TTY {
		return resource.ExecResult{}, sdk.Errorf(sdk.CodeUnsupported, "the incus driver runs commands without a terminal: leave tty off")
	}
	cfg, api, err := p.settings(ctx)
	if err != nil {
		return resource.ExecResult{}, err
	}
	name := instanceName(req.Tenant, req.Instance)
	in, err := find(ctx, api, name)
	if err != nil {
		return resource.ExecResult{}, serverError(cfg, "GET instance "+name, err)
	}
	if in == nil {
		return resource.ExecResult{}, sdk.Errorf(sdk.CodeNotFound, "instance %s of node %s/%s does not exist: provision it first", name, req.Tenant, req.Instance)
	}
	if in.StatusCode != statusRunning {
		return resource.ExecResult{}, sdk.Unavailable("instance %s of node %s/%s is %s, not running: provision it again", name, req.Tenant, req.Instance, bounded(in.Status))
	}
	args, env, err := execCommand(req, in, cfg.NodeDir, cfg.ListenHost)
	if err != nil {
		return resource.ExecResult{}, err
	}
	command := append([]string{"/bin/sh", "-c", execWrapper, "sh", req.Binary}, args...)
	r, err := api.call(ctx, http.MethodPost, instancePath(name, "exec"), nil, map[string]any{
		"command": command, "environment": env, "cwd": cfg.NodeDir,
		"wait-for-websocket": true, "record-output": false, "interactive": false,
	}, nil)
	if err != nil {
		if isNotFound(err) {
			return resource.ExecResult{}, sdk.Errorf(sdk.CodeNotFound, "instance %s of node %s/%s does not exist: provision it first", name, req.Tenant, req.Instance)
		}
		return resource.ExecResult{}, serverError(cfg, "exec in instance "+name, err)
	}
	if r.Type != "async" {
		return resource.ExecResult{}, fmt.Errorf("exec in instance %s answered %s, want an operation", name, r.Type)
	}
	var op operation
	var md execMetadata
	if err := json.Unmarshal(r.Metadata, &op); err != nil || json.Unmarshal(op.Metadata, &md) != nil {
		return resource.ExecResult{}, fmt.Errorf("exec in instance %s: the operation's metadata is not an exec's", name)
	}
	id := r.Operation
	// Whatever happens from here, the operation does not outlive the call: a command
	// still running when Exec returns is killed by incusd when control closes, and the
	// DELETE (which closes control too) is for an operation still waiting for its
	// websockets.
	bg := context.WithoutCancel(ctx)
	conns := map[string]*websocket.Conn{}
	ended := false
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		if !ended {
			dctx, cancel := context.WithTimeout(bg, 10*time.Second)
			defer cancel()
			api.call(dctx, http.MethodDelete, "/1.0/operations/"+id, nil, nil, nil)
		}
	}()
	for _, fd := range execFDs {
		secret := md.FDs[fd]
		if secret == "" {
			return resource.ExecResult{}, fmt.Errorf("exec in instance %s: the operation names no websocket for %q", name, fd)
		}
		c, err := api.websocket(ctx, id, secret)
		if err != nil {
			if ctx.Err() != nil {
				return resource.ExecResult{}, ctx.Err()
			}
			return resource.ExecResult{}, serverError(cfg, "connecting the "+fdName(fd)+" websocket of the exec in instance "+name, err)
		}
		conns[fd] = c
	}
	x := &execRun{api: api, id: id, conns: conns, stdin: req.Stdin, output: output, ctx: ctx, timeout: req.Timeout}
	res, err := x.run()
	ended = x.finished
	if err != nil {
		if errors.Is(err, errServerExec) {
			return res, serverError(cfg, "exec in instance "+name, err)
		}
		return res, err
	}
	return res, nil
}

// errServerExec marks an operation that failed without an exit status.
var errServerExec = errors.New("the exec operation failed")

func fdName(fd string) string {
	switch fd {
	case "0":
		return "stdin"
	case "1":
		return "stdout"
	case "2":
		return "stderr"
	}
	return fd
}

// execCommand expands the node spec's placeholders in the command's args and env (the
// ports of the instance's proxy devices, the files of the spec) and makes its
// environment: the node's (the instance's environment.* config, which Incus also
// passes on by itself) with the request's on top.
func execCommand(req resource.ExecRequest, in *instance, nodeDir, listenHost string) ([]string, map[string]string, error) {
	ports := map[string]int{}
	for dev, d := range in.Devices {
		if n, ok := strings.CutPrefix(dev, "port-"); ok {
			if port, ok := proxyPort(d); ok {
				ports[n] = port
			}
		}
	}
	files := map[string]contract.InstanceFile{}
	if len(req.Spec) > 0 {
		if spec, err := parseSpec(req.Spec); err == nil {
			files = spec.Files
		}
	}
	args := make([]string, len(req.Args))
	for i, a := range req.Args {
		v, err := expand(a, fmt.Sprintf("args/%d", i), nodeDir, listenHost, files, ports)
		if err != nil {
			return nil, nil, err
		}
		args[i] = v
	}
	env := map[string]string{}
	cfg := in.ExpandedConfig
	if cfg == nil {
		cfg = in.Config
	}
	for k, v := range cfg {
		if n, ok := strings.CutPrefix(k, "environment."); ok && n != "" {
			env[n] = v
		}
	}
	for k, a := range req.Env {
		v, err := expand(a, "env/"+k, nodeDir, listenHost, files, ports)
		if err != nil {
			return nil, nil, err
		}
		env[k] = v
	}
	return args, env, nil
}

// execRun is one running exec: its websockets and its operation.
type execRun struct {
	api     *apiClient
	id      string
	conns   map[string]*websocket.Conn
	stdin   []byte
	output  func(resource.ExecOutput) error
	ctx     context.Context
	timeout time.Duration

	// opEnded: the wait for the operation returned; finished: it returned the ended
	// operation.
	opEnded, finished bool
}

type execChunkMsg struct {
	stream string
	data   []byte
}

type opEnd struct {
	op  operation
	err error
}

func (x *execRun) run() (resource.ExecResult, error) {
	quit := make(chan struct{})
	defer close(quit)
	chunks := make(chan execChunkMsg)
	streamEnded := make(chan string, 2)
	for _, fd := range []string{"1", "2"} {
		go readStream(x.conns[fd], fdName(fd), chunks, streamEnded, quit)
	}
	// Control and stdin carry nothing from incusd but its pings; reading them answers
	// those.
	go drain(x.conns["control"])
	go drain(x.conns["0"])
	go sendStdin(x.conns["0"], x.stdin)

	waitCtx, cancelWait := context.WithCancel(context.WithoutCancel(x.ctx))
	defer cancelWait()
	opDone := make(chan opEnd, 1)
	go func() {
		op, err := waitOperation(waitCtx, x.api, x.id)
		opDone <- opEnd{op, err}
	}()

	var timeout <-chan time.Time
	if x.timeout > 0 {
		t := time.NewTimer(x.timeout)
		defer t.Stop()
		timeout = t.C
	}
	ctxDone := x.ctx.Done()
	var escalate <-chan time.Time
	var streamsGone <-chan time.Time
	stage := 0 // 0 running, 1 SIGTERM sent, 2 SIGKILL sent, 3 given up
	var outErr error
	timedOut, cancelled := false, false
	open := 2
	var end opEnd
	stop := func() {
		if stage == 0 {
			stage = 1
			x.signal(15)
			escalate = time.After(execGrace)
		}
	}
loop:
	for open > 0 || !x.opEnded {
		select {
		case c := <-chunks:
			if outErr == nil && !cancelled {
				if outErr = x.output(resource.ExecOutput{Stream: c.stream, Data: c.data}); outErr != nil {
					stop()
				}
			}
		case <-streamEnded:
			open--
		case end = <-opDone:
			x.opEnded, x.finished = true, end.err == nil
			ctxDone, timeout, escalate = nil, nil, nil
			// incusd sends every stream's end before it ends the operation and closes
			// the websockets after: what is still on its way is read, within a bound.
			streamsGone = time.After(5 * time.Second)
		case <-streamsGone:
			open = 0
		case <-timeout:
			timedOut = true
			timeout = nil
			stop()
		case <-ctxDone:
			cancelled = true
			ctxDone = nil
			stop()
		case <-escalate:
			switch stage {
			case 1:
				stage = 2
				x.signal(9)
				escalate = time.After(execKillWait)
			default:
				// incusd kills the command when control closes; the DELETE of Exec's
				// end closes it too, and ends the operation.
				stage = 3
				x.conns["control"].Close()
				end = opEnd{err: fmt.Errorf("the command did not end within %s of its SIGTERM", execGrace+execKillWait)}
				break loop
			}
		}
	}
	if cancelled {
		return resource.ExecResult{}, x.ctx.Err()
	}
	if outErr != nil {
		return resource.ExecResult{}, outErr
	}
	if timedOut {
		res := resource.ExecResult{ExitCode: -1, TimedOut: true, Status: "timed out after " + x.timeout.String() + " and stopped"}
		if code, ok := exitStatus(end.op); ok {
			res.Status += fmt.Sprintf(" (exit status %d)", code)
		} else if end.err != nil {
			res.Status += "; " + bounded(end.err.Error())
		}
		return res, nil
	}
	if end.err != nil {
		return resource.ExecResult{}, fmt.Errorf("%w: %v", errServerExec, end.err)
	}
	code, ok := exitStatus(end.op)
	if !ok {
		msg := bounded(end.op.Err)
		if msg == "" {
			msg = bounded(end.op.Status)
		}
		return resource.ExecResult{}, fmt.Errorf("%w without an exit status: %s (%d)", errServerExec, msg, end.op.StatusCode)
	}
	status := fmt.Sprintf("exited with status %d", code)
	if end.op.StatusCode != opSuccess && end.op.Err != "" {
		// incusd fails the operation of a command that exits 126 or 127 ("Command not
		// executable", "Command not found"), with the status in its metadata.
		status += " (" + bounded(end.op.Err) + ")"
	}
	return resource.ExecResult{ExitCode: code, Status: status}, nil
}

// exitStatus is metadata.return of an ended exec operation.
func exitStatus(op operation) (int, bool) {
	if op.StatusCode != opSuccess && op.StatusCode != opFailure {
		return 0, false
	}
	var md execMetadata
	if json.Unmarshal(op.Metadata, &md) != nil || md.Return == nil {
		return 0, false
	}
	return *md.Return, true
}

// signal sends a signal on the control websocket, as incusd's exec control handler
// takes it (api.InstanceExecControl).
func (x *execRun) signal(sig int) {
	c := x.conns["control"]
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.WriteJSON(map[string]any{"command": "signal", "signal": sig})
}

// readStream passes the binary messages of an output websocket on, in chunks of at most
// execChunk, until incusd's end of the stream (an empty text message) or the close.
func readStream(c *websocket.Conn, stream string, chunks chan<- execChunkMsg, ended chan<- string, quit <-chan struct{}) {
	defer func() { ended <- stream }()
	buf := make([]byte, execChunk)
	for {
		mt, r, err := c.NextReader()
		if err != nil {
			return
		}
		if mt != websocket.BinaryMessage {
			// The barrier: the stream ended. Read on (pings) until the close.
			go drain(c)
			return
		}
		for {
			n, err := io.ReadFull(r, buf)
			if n > 0 {
				select {
				case chunks <- execChunkMsg{stream, append([]byte(nil), buf[:n]...)}:
				case <-quit:
					return
				}
			}
			if err != nil {
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					break
				}
				return
			}
		}
	}
}

// drain reads a websocket until it closes, which answers its pings.
func drain(c *websocket.Conn) {
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
	}
}

// sendStdin writes the command's stdin as binary messages and then closes it: an empty
// text message, which incusd takes as the end of the stream (shared/ws of lxc/incus).
func sendStdin(c *websocket.Conn, data []byte) {
	for len(data) > 0 {
		n := min(len(data), execChunk)
		if err := c.WriteMessage(websocket.BinaryMessage, data[:n]); err != nil {
			return
		}
		data = data[n:]
	}
	c.WriteMessage(websocket.TextMessage, []byte{})
}

// waitOperation waits for an operation to end and returns it, whatever its status.
func waitOperation(ctx context.Context, api *apiClient, id string) (operation, error) {
	for {
		var op operation
		if err := api.get(ctx, "/1.0/operations/"+id+"/wait", url.Values{"timeout": {"30"}}, &op); err != nil {
			return op, err
		}
		switch op.StatusCode {
		case opSuccess, opFailure, opCancelled:
			return op, nil
		}
		if err := ctx.Err(); err != nil {
			return op, err
		}
	}
}

// websocket connects to one websocket of an operation
// (GET /1.0/operations/<id>/websocket?secret=<secret>) with the client certificate and
// the server's check of the other calls.
func (c *apiClient) websocket(ctx context.Context, id, secret string) (*websocket.Conn, error) {
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok {
		return nil, errors.New("the client has no TLS transport")
	}
	d := websocket.Dialer{TLSClientConfig: tr.TLSClientConfig.Clone(), HandshakeTimeout: execDialTimeout,
		ReadBufferSize: execChunk, WriteBufferSize: execChunk}
	q := url.Values{"secret": {secret}}
	if c.project != "" {
		q.Set("project", c.project)
	}
	u := "wss://" + strings.TrimPrefix(c.base, "https://") + "/1.0/operations/" + url.PathEscape(id) + "/websocket?" + q.Encode()
	dctx, cancel := context.WithTimeout(ctx, execDialTimeout)
	defer cancel()
	conn, resp, err := d.DialContext(dctx, u, nil)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if _, perr := parseResponse(resp.StatusCode, body); perr != nil {
				return nil, perr
			}
			return nil, &apiError{Code: resp.StatusCode, Message: "the websocket handshake failed: " + bounded(err.Error())}
		}
		return nil, errors.New(bounded(strings.ReplaceAll(err.Error(), secret, "[secret]")))
	}
	return conn, nil
}

var _ resource.Executor = (*provider)(nil)
