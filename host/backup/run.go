package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// tool is a program the package runs, with the Debian package that installs it.
type tool struct{ name, pkg string }

var (
	resticTool    = tool{"restic", "restic"}
	pgDumpTool    = tool{"pg_dump", "postgresql-client"}
	pgRestoreTool = tool{"pg_restore", "postgresql-client"}
)

// ErrToolMissing is wrapped by the error of an operation whose program is not installed.
var ErrToolMissing = errors.New("backup program missing")

func (t tool) path() (string, error) {
	p, err := exec.LookPath(t.name)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not in PATH: install it (Debian: apt-get install %s)", ErrToolMissing, t.name, t.pkg)
	}
	return p, nil
}

// childEnv is the environment of a child: ours without the variables that would change
// what restic or libpq connect to, plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "RESTIC_") || strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// command makes a child that is interrupted (not killed) when ctx ends, so restic can
// remove its lock from the repository, and killed if it then lingers.
func command(ctx context.Context, bin string, args []string, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	return cmd
}

// stderrTail keeps the end of what a child writes to stderr, starting at a line.
type stderrTail struct{ buf []byte }

const stderrKeep = 16 << 10

func (s *stderrTail) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	if len(s.buf) > stderrKeep {
		cut := s.buf[len(s.buf)-stderrKeep:]
		// Start at a line so that no fragment of a secret survives the cut.
		if i := bytes.IndexByte(cut, '\n'); i >= 0 {
			cut = cut[i+1:]
		} else {
			cut = nil
		}
		s.buf = append(s.buf[:0], cut...)
	}
	return len(p), nil
}

func (s *stderrTail) contains(substr string) bool {
	return bytes.Contains(s.buf, []byte(substr))
}

// lines returns the last n non-empty lines, one line of text, with secrets replaced.
func (s *stderrTail) lines(n int, secrets []string) string {
	text := scrub(string(s.buf), secrets)
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, " | ")
}

// scrub replaces every secret value in s.
func scrub(s string, secrets []string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[secret]")
		}
	}
	return s
}

// childError describes a failed child with the end of its stderr.
func childError(name string, err error, stderr *stderrTail, secrets []string) error {
	msg := stderr.lines(5, secrets)
	if msg == "" {
		return fmt.Errorf("%s: %s", name, scrub(err.Error(), secrets))
	}
	return fmt.Errorf("%s: %s: %s", name, scrub(err.Error(), secrets), msg)
}

// scrubbedError is an error whose message has every secret value replaced; errors.Is
// and errors.As still see the error it wraps.
type scrubbedError struct {
	err error
	msg string
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// hide scrubs the message of err, which may name things that hold a secret.
func hide(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	return &scrubbedError{err: err, msg: scrub(err.Error(), secrets)}
}
