package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"filippo.io/age"
)

// store keeps the versions of secret files under dir as
// <dir>/<tenant>/<instance>/<file>/v<N>.age, each one age-encrypted to the store's
// identity, and beside them generator, the generator of the latest version (not secret).
type store struct {
	dir string
	id  *age.X25519Identity
}

var versionFile = regexp.MustCompile(`^v([1-9][0-9]*)\.age$`)

const generatorFile = "generator"

func (s *store) instanceDir(tenant, instance string) string {
	return filepath.Join(s.dir, tenant, instance)
}

func (s *store) fileDir(tenant, instance, file string) string {
	return filepath.Join(s.dir, tenant, instance, file)
}

func (s *store) versionPath(tenant, instance, file string, version int) string {
	return filepath.Join(s.fileDir(tenant, instance, file), "v"+strconv.Itoa(version)+".age")
}

// latest returns the highest version of a file, 0 when it has none.
func (s *store) latest(tenant, instance, file string) (int, error) {
	entries, err := os.ReadDir(s.fileDir(tenant, instance, file))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing the versions of %s/%s/%s: %w", tenant, instance, file, err)
	}
	top := 0
	for _, e := range entries {
		if m := versionFile.FindStringSubmatch(e.Name()); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n > top {
				top = n
			}
		}
	}
	return top, nil
}

// generator returns how the latest version was made, "" when unknown.
func (s *store) generator(tenant, instance, file string) string {
	b, err := os.ReadFile(filepath.Join(s.fileDir(tenant, instance, file), generatorFile))
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// read decrypts one version; a missing version is fs.ErrNotExist.
func (s *store) read(tenant, instance, file string, version int) ([]byte, error) {
	path := s.versionPath(tenant, instance, file, version)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := age.Decrypt(f, s.id)
	if err != nil {
		return nil, fmt.Errorf("secret file %s cannot be decrypted: it is damaged or was encrypted to another key than %s: %w", path, filepath.Join(s.dir, keyFileName), err)
	}
	v, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("secret file %s cannot be decrypted: it is damaged (its authentication failed): %w", path, err)
	}
	return v, nil
}

// write stores value as a new version; it never replaces one that exists.
func (s *store) write(tenant, instance, file string, version int, generator string, value []byte) error {
	dir := s.fileDir(tenant, instance, file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	var ct bytes.Buffer
	w, err := age.Encrypt(&ct, s.id.Recipient())
	if err != nil {
		return fmt.Errorf("encrypting %s/%s/%s: %w", tenant, instance, file, err)
	}
	if _, err := w.Write(value); err != nil {
		return fmt.Errorf("encrypting %s/%s/%s: %w", tenant, instance, file, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("encrypting %s/%s/%s: %w", tenant, instance, file, err)
	}
	path := s.versionPath(tenant, instance, file, version)
	if err := writeNew(path, ct.Bytes()); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("version %d of %s/%s/%s was written by another provision at the same time: retry", version, tenant, instance, file)
		}
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// The generator is written after the value: a crash between the two only makes the
	// next provision generate once more, never keep a value under the wrong generator.
	return writeReplace(filepath.Join(dir, generatorFile), []byte(generator+"\n"))
}

// remove deletes an instance's secrets and, when it was the last, its tenant's directory.
func (s *store) remove(tenant, instance string) error {
	if err := os.RemoveAll(s.instanceDir(tenant, instance)); err != nil {
		return fmt.Errorf("removing the secrets of %s/%s: %w", tenant, instance, err)
	}
	_ = os.Remove(filepath.Join(s.dir, tenant)) // fails while other instances remain
	return syncDir(s.dir)
}

// writeNew writes data to path atomically and fails with fs.ErrExist if path exists.
func writeNew(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeReplace writes data to path atomically, replacing what was there.
func writeReplace(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeTemp writes data, synced, to a new file of mode 0600 beside path.
func writeTemp(path string, data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
