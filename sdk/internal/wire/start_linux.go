package wire

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal asks the kernel to kill the plugin when the host dies; the plugin's
// own parent watch covers the other systems and the case where this is lost.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
