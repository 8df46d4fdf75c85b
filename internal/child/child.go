// Package child starts the long-lived server processes fedhost and its plugins manage
// themselves (a PostgreSQL cluster, a versitygw gateway, test servers) so that they end
// with the process that started them, and gives what starting one needs: a free port
// and the end of its log.
package child

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
)

// Start starts cmd on an OS thread locked for the child's whole life. Linux sends the
// Pdeathsig of cmd.SysProcAttr when the thread that forked the child ends, not the
// process: a Go thread may end at any time, so without this a server could be killed
// while its parent runs on. exited is closed once the child has ended and been waited
// for.
func Start(cmd *exec.Cmd) (exited <-chan struct{}, err error) {
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// FreePort returns a TCP port that is free on 127.0.0.1 now. Another process may take it
// before the caller binds it: a caller retries on a new port when its server cannot.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail returns the last lines (at most n, within its last 16 KiB) of a log file, or why
// it cannot be read.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const window = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
