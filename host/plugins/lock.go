package plugins

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/sdk/client"
)

// LockFile is the name of the lock file in the plugin directory. Its lines are those of
// sha256sum (`<hex>  <file>`), so `sha256sum -c plugins.lock` checks it too.
const LockFile = "plugins.lock"

// Lock maps a binary's file name to its locked sha256, hex encoded.
type Lock map[string]string

// ReadLock reads the lock file of dir. A missing file is an empty lock.
func ReadLock(dir string) (Lock, error) {
	path := filepath.Join(dir, LockFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Lock{}, nil
	}
	if err != nil {
		return nil, err
	}
	lock := Lock{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		sum, file, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || file == "" || strings.ContainsRune(file, '/') {
			return nil, fmt.Errorf("%s:%d: want `<sha256 hex>  <file name>`: run `fedhost plugins lock` to write it anew", path, n)
		}
		if _, err := hex.DecodeString(sum); err != nil {
			return nil, fmt.Errorf("%s:%d: the checksum is not hex: run `fedhost plugins lock` to write it anew", path, n)
		}
		lock[file] = sum
	}
	return lock, sc.Err()
}

// Write writes the lock into dir, atomically.
func (l Lock) Write(dir string) error {
	files := make([]string, 0, len(l))
	for f := range l {
		files = append(files, f)
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s  %s\n", l[f], f)
	}
	tmp, err := os.CreateTemp(dir, LockFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, LockFile))
}

// Checksum is the lock state of one binary.
type Checksum string

// The lock states.
const (
	ChecksumLocked   Checksum = "locked"
	ChecksumChanged  Checksum = "changed"
	ChecksumUnlocked Checksum = "unlocked"
)

// Verify compares a binary with the lock; got is its current sha256.
func (l Lock) Verify(b Binary) (state Checksum, got string, err error) {
	got, err = client.FileSHA256(b.Path)
	if err != nil {
		return "", "", err
	}
	want, ok := l[b.File]
	switch {
	case !ok:
		return ChecksumUnlocked, got, nil
	case want != got:
		return ChecksumChanged, got, nil
	}
	return ChecksumLocked, got, nil
}
