package child

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStartWaitsAndClosesExited(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited, err := Start(cmd)
	require.NoError(t, err)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("exited was not closed")
	}
	require.Equal(t, 3, cmd.ProcessState.ExitCode(), "the child was waited for")

	_, err = Start(exec.Command(filepath.Join(t.TempDir(), "missing")))
	require.Error(t, err)
}

func TestFreePortCanBeBound(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	l.Close()
}

func TestTailKeepsTheLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var lines []string
	for i := range 30 {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n\n"), 0o600))
	require.Equal(t, "line 28\nline 29", Tail(path, 2))
	require.Contains(t, Tail(filepath.Join(t.TempDir(), "none"), 2), "no such file")
}
