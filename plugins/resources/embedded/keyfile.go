package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"filippo.io/age"
)

// keyFileName is the age X25519 identity in the store's directory.
const keyFileName = "age-identity.txt"

// loadOrCreateIdentity reads the store's age identity, making it (mode 0600, in a
// directory of mode 0700) on first start. A key file that others may read is refused.
func loadOrCreateIdentity(dir string) (*age.X25519Identity, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the secret directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, keyFileName)
	id, err := readIdentity(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	fresh, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, fmt.Errorf("generating the age identity: %w", err)
	}
	text := "# fedhost embedded secret provider: age identity. Losing it loses every secret.\n" +
		"# public key: " + fresh.Recipient().String() + "\n" + fresh.String() + "\n"
	// Link, not rename: of two plugins starting on one directory, the second keeps the first's key.
	if err := writeNew(path, []byte(text)); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("writing the age identity %s: %w", path, err)
	}
	return readIdentity(path)
}

func readIdentity(path string) (*age.X25519Identity, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the age key file %s has mode %04o: others may read it; make it readable by its owner only (chmod 600 %s) and check that it was not copied", path, perm, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the age key file: %w", err)
	}
	defer f.Close()
	ids, err := age.ParseIdentities(f)
	if err != nil {
		return nil, fmt.Errorf("the age key file %s is not an age identity file: %w", path, err)
	}
	id, ok := ids[0].(*age.X25519Identity)
	if len(ids) != 1 || !ok {
		return nil, fmt.Errorf("the age key file %s must hold exactly one X25519 identity", path)
	}
	return id, nil
}
