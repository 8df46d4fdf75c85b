package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// execGrace is the SIGTERM-to-SIGKILL time of a command that is cancelled or times out.
const execGrace = 2 * time.Second

// execChunk is the most output one message carries.
const execChunk = 32 << 10

// Exec runs a command on the node's machine, in its working dir with its environment
// (the plan its process runs with, so its files and ports are the node's), in a session
// of its own (setsid): a timeout or a cancel ends its whole process group from a second
// SSH session, and its end takes what it left in the group with it. The command and its
// environment go in a 0600 script in the node's .fedhost dir, removed as it starts, so
// neither is on a command line of the machine; stdin goes over the SSH channel. The
// node's state is the one this plugin last wrote or read, if the machine's still has its
// hash; otherwise it is read again.
func (p *provider) Exec(ctx context.Context, req resource.ExecRequest, output func(resource.ExecOutput) error) (resource.ExecResult, error) {
	cfg, err := p.settings()
	if err != nil {
		return resource.ExecResult{}, err
	}
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return resource.ExecResult{}, err
	}
	key := req.Tenant + "/" + req.Instance
	m := cfg.place(req.Tenant, req.Instance)
	wd := path.Join(m.WorkDir, req.Tenant, req.Instance)
	st, known := p.remembered(key)
	var pc preparedExec
	for {
		if !known {
			if st, err = p.readState(ctx, cfg, m, key, wd); err != nil {
				return resource.ExecResult{}, err
			}
		}
		pc, err = p.prepareExec(ctx, cfg, m, key, wd, st, req)
		if !errors.Is(err, errStale) {
			break
		}
		if !known {
			// Read just now and changed already: a provision is under way.
			return resource.ExecResult{}, sdk.Unavailable("node %s changed while the command was being prepared: run it again", key)
		}
		known = false
	}
	if err != nil {
		return resource.ExecResult{}, err
	}
	script, pidFile, bin := pc.script, pc.pidFile, pc.bin

	client, err := p.client(ctx, cfg, m)
	if err != nil {
		return resource.ExecResult{}, err
	}
	sess, err := client.NewSession()
	if err != nil {
		p.drop(m, client)
		return resource.ExecResult{}, sdk.Unavailable("machine %q: opening an SSH session for the command: %v", m.Name, err)
	}
	defer sess.Close()
	out := &execOutput{send: output}
	var readers sync.WaitGroup
	if req.TTY {
		// Echo off: what is written to the terminal (a password) is read by the command
		// and never comes back as output; no output processing, so newlines stay.
		if err := sess.RequestPty("dumb", 24, 200, ssh.TerminalModes{ssh.ECHO: 0, ssh.OPOST: 0}); err != nil {
			return resource.ExecResult{}, sdk.Unavailable("machine %q: asking for a terminal for the command: %v", m.Name, err)
		}
	}
	for _, stream := range []string{"stdout", "stderr"} {
		var r io.Reader
		if stream == "stdout" {
			r, err = sess.StdoutPipe()
		} else {
			r, err = sess.StderrPipe()
		}
		if err != nil {
			return resource.ExecResult{}, fmt.Errorf("machine %q: the command's %s: %w", m.Name, stream, err)
		}
		readers.Add(1)
		go func() { defer readers.Done(); out.copy(stream, r) }()
	}
	sess.Stdin = bytes.NewReader(req.Stdin)
	if err := sess.Start("sh " + shq(script)); err != nil {
		_, _ = p.run(context.WithoutCancel(ctx), cfg, m, "rm -f "+shq(script))
		return resource.ExecResult{}, sdk.Unavailable("machine %q: starting the command: %v", m.Name, err)
	}
	p.log.Info("command started", "node", key, "machine", m.Name, "binary", path.Base(bin))

	exited := make(chan error, 1)
	go func() { exited <- sess.Wait() }()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var waitErr error
	timedOut, cancelled := false, false
	select {
	case waitErr = <-exited:
	case <-timeout:
		timedOut = true
		waitErr = p.stopRemote(ctx, cfg, m, pidFile, exited)
	case <-ctx.Done():
		cancelled = true
		waitErr = p.stopRemote(ctx, cfg, m, pidFile, exited)
	}
	readers.Wait()
	res := remoteResult(waitErr)
	if timedOut {
		res.TimedOut = true
		res.Status = fmt.Sprintf("timed out after %s and killed (%s)", req.Timeout, res.Status)
	}
	p.log.Info("command ended", "node", key, "machine", m.Name, "how", res.Status)
	if out.err != nil {
		return res, out.err
	}
	if cancelled {
		return res, ctx.Err()
	}
	var missing *ssh.ExitMissingError
	if errors.As(waitErr, &missing) {
		// The connection broke: the command's session leader lives on without it on
		// the machine (no terminal, no hangup), so it is ended from a new connection.
		p.drop(m, client)
		if err := p.killRemote(ctx, cfg, m, pidFile); err != nil {
			p.log.Warn("stopping a command whose connection broke failed", "node", key, "machine", m.Name, "error", err)
			return res, sdk.Unavailable("machine %q: the SSH connection ended before the command's exit status came, and the command could not be stopped: it may still run", m.Name)
		}
		return res, sdk.Unavailable("machine %q: the SSH connection ended before the command's exit status came; the command was stopped: run it again", m.Name)
	}
	return res, nil
}

// readState reads the node's .fedhost/state.json from its machine.
func (p *provider) readState(ctx context.Context, cfg settings, m *machine, key, wd string) (nodeState, error) {
	raw, err := p.run(ctx, cfg, m, fmt.Sprintf("cat %s 2>/dev/null || true", shq(path.Join(wd, ".fedhost", "state.json"))))
	if err != nil {
		return nodeState{}, fmt.Errorf("node %s: reading its state: %w", key, err)
	}
	var st nodeState
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &st) != nil || st.Hash == "" {
		return nodeState{}, sdk.Errorf(sdk.CodeNotFound, "node %s is not provisioned on machine %q: provision it before running a command in it", key, m.Name)
	}
	p.remember(key, &st)
	return st, nil
}

// errStale says the machine's state of the node is not the one the command was made
// from.
var errStale = errors.New("stale")

// preparedExec is a command written to the node's machine, ready to run.
type preparedExec struct{ script, pidFile, bin string }

// prepareExec expands the command's placeholders from st and writes its script on the
// machine, if the node's state there is still st (errStale otherwise).
func (p *provider) prepareExec(ctx context.Context, cfg settings, m *machine, key, wd string, st nodeState, req resource.ExecRequest) (preparedExec, error) {
	var err error
	pl := st.Plan
	bin := pl.Binary
	if req.Binary != "" {
		if !plainName.MatchString(req.Binary) {
			return preparedExec{}, sdk.Invalid("binary", "the binary to run must be a plain file name of the machine's artifacts_dir")
		}
		bin = path.Join(m.ArtifactsDir, req.Binary)
	}
	files := map[string]contract.InstanceFile{}
	for name := range pl.Files {
		files[name] = contract.InstanceFile{}
	}
	args := make([]string, len(req.Args))
	for i, a := range req.Args {
		if args[i], err = expand(a, fmt.Sprintf("args/%d", i), wd, pl.ListenHost, files, pl.Ports); err != nil {
			return preparedExec{}, err
		}
	}
	env := map[string]string{}
	for k, v := range pl.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		if !envName.MatchString(k) {
			return preparedExec{}, sdk.Invalid("env", "an environment variable's name must be letters, digits and _ and not start with a digit")
		}
		if env[k], err = expand(v, "env/"+k, wd, pl.ListenHost, files, pl.Ports); err != nil {
			return preparedExec{}, err
		}
	}
	b := make([]byte, 8)
	if _, err := crand.Read(b); err != nil {
		return preparedExec{}, err
	}
	id := hex.EncodeToString(b)
	script, pidFile := path.Join(wd, ".fedhost", "exec-"+id+".sh"), path.Join(wd, ".fedhost", "exec-"+id+".pid")
	out, err := p.run(ctx, cfg, m, writeExecScript(wd, st.Hash, script, pidFile, bin, args, env))
	if err != nil {
		return preparedExec{}, fmt.Errorf("node %s: preparing the command: %w", key, err)
	}
	if strings.TrimSpace(string(out)) == "@@stale" {
		return preparedExec{}, errStale
	}
	return preparedExec{script: script, pidFile: pidFile, bin: bin}, nil
}

// writeExecScript is the script that writes the command's script. The command's script,
// run as "sh SCRIPT", removes itself, starts the command in a new session with the
// script's stdin (setsid, in the background, so the script knows its process group from
// the pid file the new session leader writes), waits for it, kills what it left in its
// group and exits with its status.
func writeExecScript(wd, hash, script, pidFile, bin string, args []string, env map[string]string) string {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	var cmd strings.Builder
	cmd.WriteString("exec env -i")
	for _, k := range names {
		cmd.WriteString(" " + shq(k+"="+env[k]))
	}
	cmd.WriteString(" " + shq(bin))
	for _, a := range args {
		cmd.WriteString(" " + shq(a))
	}
	body := fmt.Sprintf(`rm -f "$0"
cd %s || exit 127
exec 3<&0
setsid -w sh -c 'echo $$ > %s; %s' <&3 3<&- &
exec 3<&-
wait $!
st=$?
pg=$(cat %s 2>/dev/null) && [ -n "$pg" ] && kill -s KILL -- -"$pg" 2>/dev/null
rm -f %s
exit $st
`, shq(wd), shq(pidFile), strings.ReplaceAll(cmd.String(), "'", `'\''`), shq(pidFile), shq(pidFile))
	return fmt.Sprintf("set -e\numask 077\ngrep -qF %s %s 2>/dev/null || { echo @@stale; exit 0; }\nprintf '%%s' %s | base64 -d > %s\n",
		shq(`"hash":"`+hash+`"`), shq(path.Join(path.Dir(script), "state.json")), shq(base64.StdEncoding.EncodeToString([]byte(body))), shq(script))
}

// stopRemote ends the command's process group from a second session (killRemote), then
// waits for the command's session to end.
func (p *provider) stopRemote(ctx context.Context, cfg settings, m *machine, pidFile string, exited <-chan error) error {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), execGrace+cfg.connectTimeout+10*time.Second)
	defer cancel()
	if err := p.killRemote(stopCtx, cfg, m, pidFile); err != nil {
		p.log.Warn("stopping a command failed", "machine", m.Name, "error", err)
	}
	select {
	case err := <-exited:
		return err
	case <-stopCtx.Done():
		return stopCtx.Err()
	}
}

// killRemote ends the command's process group named by its pid file: SIGTERM, then
// SIGKILL after execGrace. A command that ended already removed its pid file, which is
// waited for a few seconds in case the command has not written it yet.
func (p *provider) killRemote(ctx context.Context, cfg settings, m *machine, pidFile string) error {
	script := fmt.Sprintf(`%s
i=0; while [ ! -s %s ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
pg=$(cat %s 2>/dev/null) || exit 0
[ -n "$pg" ] || exit 0
kill -s TERM -- -"$pg" 2>/dev/null || exit 0
i=0; while alive "$pg" && [ $i -lt %d ]; do sleep 0.1; i=$((i+1)); done
kill -s KILL -- -"$pg" 2>/dev/null || true
`, aliveFunc, shq(pidFile), shq(pidFile), int(execGrace/(100*time.Millisecond)))
	killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), execGrace+cfg.connectTimeout+10*time.Second)
	defer cancel()
	_, err := p.run(killCtx, cfg, m, script)
	return err
}

// remoteResult reads how the command's session ended. The script exits with the
// command's status, 128+N when signal N killed it (as the shell reports it).
func remoteResult(err error) resource.ExecResult {
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return resource.ExecResult{Status: "exited with status 0"}
	case errors.As(err, &ee):
		if ee.Signal() != "" {
			return resource.ExecResult{ExitCode: -1, Status: "killed by signal SIG" + ee.Signal()}
		}
		code := ee.ExitStatus()
		if code > 128 && code < 128+65 {
			return resource.ExecResult{ExitCode: code, Status: fmt.Sprintf("exited with status %d (killed by signal %d)", code, code-128)}
		}
		return resource.ExecResult{ExitCode: code, Status: fmt.Sprintf("exited with status %d", code)}
	default:
		return resource.ExecResult{ExitCode: -1, Status: "ended without an exit status"}
	}
}

// execOutput passes a command's output on, one message at a time; after the first
// failure to send (the caller went away) it only drains.
type execOutput struct {
	send func(resource.ExecOutput) error
	mu   sync.Mutex
	err  error
}

func (o *execOutput) copy(stream string, r io.Reader) {
	buf := make([]byte, execChunk)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			o.mu.Lock()
			if o.err == nil {
				o.err = o.send(resource.ExecOutput{Stream: stream, Data: bytes.Clone(buf[:k])})
			}
			o.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

var _ resource.Executor = (*provider)(nil)
