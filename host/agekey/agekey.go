// Package agekey keeps an age identity in a file of the host's data directory, made
// (mode 0600) on first start: the Terraform states' key (host/tfstate) and the migration
// key (host/migration) are such files.
package agekey

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"filippo.io/age"
)

// File names one identity file and what it is for.
type File struct {
	// Name is the file's name in the data directory.
	Name string
	// What names the key in messages ("the terraform state key").
	What string
	// Header is the comment line written above the key.
	Header string
	// Generate makes a new identity and returns its text.
	Generate func() (string, error)
}

// LoadOrCreate reads the identity of f in dataDir, making it on first start. A key file
// that others may read, or that holds anything but one identity, is refused.
func (f File) LoadOrCreate(dataDir string) (age.Identity, error) {
	// As the store makes it: others may pass through, not list it (the managed PostgreSQL
	// cluster's user keeps its state below it). The key file itself is 0600.
	if err := os.MkdirAll(dataDir, 0o711); err != nil {
		return nil, fmt.Errorf("making the data directory %s: %w", dataDir, err)
	}
	path := filepath.Join(dataDir, f.Name)
	id, err := f.read(path)
	if errors.Is(err, fs.ErrNotExist) {
		text, gerr := f.Generate()
		if gerr != nil {
			return nil, fmt.Errorf("generating %s: %w", f.What, gerr)
		}
		if err := writeNew(path, []byte("# "+f.Header+"\n"+text+"\n")); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("writing %s %s: %w", f.What, path, err)
		}
		id, err = f.read(path)
	}
	return id, err
}

func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (f File) read(path string) (age.Identity, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s file %s has mode %04o: others may read it; make it readable by its owner only (chmod 600 %s)", f.What, path, perm, path)
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s file: %w", f.What, err)
	}
	defer file.Close()
	ids, err := age.ParseIdentities(file)
	if err != nil {
		return nil, fmt.Errorf("%s file %s is not an age identity file: restore it from a backup", f.What, path)
	}
	if len(ids) != 1 {
		return nil, fmt.Errorf("%s file %s must hold exactly one identity", f.What, path)
	}
	return ids[0], nil
}
