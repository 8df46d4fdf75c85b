//go:build !linux

package wire

import "os/exec"

func setParentDeathSignal(*exec.Cmd) {}
