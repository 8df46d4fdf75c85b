package main

import (
	"fmt"
	"io"
	"os"
)

// A node writes its stdout and stderr straight into logs/stdout.log and logs/stderr.log,
// opened O_APPEND, and the supervisor rotates them by copy and truncate. A pipe through
// the plugin would be the usual rotating writer, but the node would then die of SIGPIPE
// (Go programs do on stdout and stderr) when the plugin stops, and nodes must outlive it.

// rotateIfLarge rotates path when it has reached max bytes, keeping keep older files
// path.1 (newest) to path.<keep>. Lines the node writes between the copy and the
// truncate are lost, as with logrotate's copytruncate.
func rotateIfLarge(path string, max int64, keep int) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() < max {
		return false, nil
	}
	for i := keep - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", path, i), fmt.Sprintf("%s.%d", path, i+1)); err != nil && !os.IsNotExist(err) {
			return false, fmt.Errorf("rotating %s: %w", path, err)
		}
	}
	if err := copyFile(path, path+".1"); err != nil {
		return false, fmt.Errorf("rotating %s: %w", path, err)
	}
	if err := os.Truncate(path, 0); err != nil {
		return false, fmt.Errorf("rotating %s: %w", path, err)
	}
	return true, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
