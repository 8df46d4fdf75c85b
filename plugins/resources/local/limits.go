package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// launchArg makes the plugin binary a launcher: `fedhost-resource-local <launchArg> BYTES
// BINARY ARGS...` sets the memory limit on itself and then becomes BINARY by exec, so
// the limit holds from the node's first instruction (a limit set on the child after its
// start would race with its runtime's start-up).
const launchArg = "__fedhost-local-launch"

// memoryLimit is the rlimit that memory_mb sets. RLIMIT_DATA bounds the private writable
// memory (heap, anonymous mappings) of the process. RLIMIT_AS, the address space, would
// refuse every Go binary below about 800 MB, since the Go runtime reserves far more
// address space than it uses (1.5 GB for a small HTTP server).
const memoryLimit = unix.RLIMIT_DATA

// launchCommand returns the path and arguments that start pl's binary under its limits.
func launchCommand(pl plan) (string, []string, error) {
	if pl.MemoryMB == 0 {
		return pl.Binary, pl.Args, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("finding the plugin binary to launch the node under its memory limit: %w", err)
	}
	args := append([]string{launchArg, strconv.FormatUint(uint64(pl.MemoryMB)<<20, 10), pl.Binary}, pl.Args...)
	return self, args, nil
}

// launch is the launcher's main: args are BYTES BINARY ARGS...
func launch(args []string) {
	if len(args) < 2 {
		fmt.Fprintf(os.Stderr, "%s: want BYTES BINARY [ARGS...]\n", launchArg)
		os.Exit(2)
	}
	limit, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: memory limit %q: %v\n", launchArg, args[0], err)
		os.Exit(2)
	}
	if err := unix.Setrlimit(memoryLimit, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintf(os.Stderr, "%s: setting the memory limit: %v\n", launchArg, err)
		os.Exit(2)
	}
	err = syscall.Exec(args[1], args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "%s: running %s: %v\n", launchArg, args[1], err)
	os.Exit(127)
}
