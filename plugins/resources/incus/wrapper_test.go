package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The wrapper stops the command and what it started on a SIGTERM that comes as soon as
// the command has printed: the shell may not have run c=$! yet then, and the wrapper must
// not exit and leave the command running. Run many times, as the window is narrow: on a
// loaded machine the wrapper without the fix failed within three runs of 100.
func TestWrapperStopsTheCommandOnAnEarlySIGTERM(t *testing.T) {
	t.Parallel()
	for i := range 100 {
		cmd := exec.Command("/bin/sh", "-c", execWrapper, "sh", "/bin/sh", "-c", `sleep 300 & echo "$$ $!"; wait`)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		_ = cmd.Wait()
		deadline := time.Now().Add(2 * time.Second)
		for _, pid := range strings.Fields(line) {
			for {
				b, err := os.ReadFile("/proc/" + pid + "/stat")
				if err != nil || strings.Contains(string(b), ") Z ") {
					break
				}
				if time.Now().After(deadline) {
					if n, err := strconv.Atoi(pid); err == nil {
						_ = syscall.Kill(-n, syscall.SIGKILL) // its own session and group
					}
					t.Fatalf("run %d: process %s of the command still runs after the wrapper ended", i, pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}
