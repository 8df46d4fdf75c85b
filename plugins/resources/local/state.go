package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const stateFile = "state.json"

// nodeState is what the provider records of a node in <workdir>/state.json, so that a new
// run of the plugin finds, adopts or restarts it.
type nodeState struct {
	Tenant    string    `json:"tenant"`
	Instance  string    `json:"instance"`
	Hash      string    `json:"hash"`
	Plan      plan      `json:"plan"`
	PID       int       `json:"pid,omitempty"`
	StartTime uint64    `json:"start_time,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
}

func readState(workdir string) (nodeState, error) {
	var st nodeState
	b, err := os.ReadFile(filepath.Join(workdir, stateFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("reading %s: %w", filepath.Join(workdir, stateFile), err)
	}
	return st, nil
}

// writeState replaces state.json whole, so a crash leaves the old or the new one.
func writeState(workdir string, st nodeState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(workdir, stateFile), b)
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// mkdirPrivate makes dir and its missing parents 0700.
func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// removeExcept removes everything in dir but the volume paths (relative to dir) and the
// directories that lead to them.
func removeExcept(dir string, keep []string) error {
	return removeBelow(dir, "", keep)
}

func removeBelow(dir, rel string, keep []string) error {
	entries, err := os.ReadDir(filepath.Join(dir, rel))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(rel, e.Name())
		switch {
		case isKept(path, keep):
		case leadsToKept(path, keep) && e.IsDir():
			if err := removeBelow(dir, path, keep); err != nil {
				return err
			}
		default:
			if err := os.RemoveAll(filepath.Join(dir, path)); err != nil {
				return err
			}
		}
	}
	return nil
}

func isKept(path string, keep []string) bool {
	for _, k := range keep {
		if path == k {
			return true
		}
	}
	return false
}

func leadsToKept(path string, keep []string) bool {
	for _, k := range keep {
		if strings.HasPrefix(k, path+"/") {
			return true
		}
	}
	return false
}
