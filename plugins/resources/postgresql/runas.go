package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// osUser is who initdb and postgres run as: the plugin's own user, or, when the plugin
// runs as root (which PostgreSQL refuses), the postgres system user, else nobody.
type osUser struct {
	name     string
	uid, gid int
	switched bool
}

func runAs() (*osUser, error) {
	if os.Geteuid() != 0 {
		return &osUser{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		if u, err = user.Lookup("nobody"); err != nil {
			return nil, errors.New("the plugin runs as root, which PostgreSQL refuses, and neither a postgres nor a nobody user exists to run the managed cluster as: create a postgres system user")
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &osUser{name: u.Username, uid: uid, gid: gid, switched: true}, nil
}

// credential is what exec switches to; nil keeps the plugin's own user. Supplementary
// groups are dropped.
func (o *osUser) credential() *syscall.Credential {
	if !o.switched {
		return nil
	}
	return &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.gid), Groups: []uint32{}}
}

// prepare makes the cluster dir, hands it to the user and checks the user can reach it.
// The plugin's data dir, its parent, is the plugin's own: it lets the user pass through
// it (search only, no listing). Directories above it are the provider's: they are only
// checked.
func (o *osUser) prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the cluster dir: %w", err)
	}
	if !o.switched {
		return nil
	}
	dataDir := filepath.Dir(dir)
	if ok, mode, err := o.canEnter(dataDir); err != nil {
		return err
	} else if !ok {
		if err := os.Chmod(dataDir, mode|0o001); err != nil {
			return fmt.Errorf("letting %s through the plugin's data dir %s: %w", o.name, dataDir, err)
		}
		hclog.Default().Info("let the cluster's user through the plugin's data dir", "dir", dataDir, "user", o.name)
	}
	for p := filepath.Dir(dataDir); ; p = filepath.Dir(p) {
		ok, mode, err := o.canEnter(p)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("the managed cluster runs as user %s (uid %d), which cannot enter %s (mode %v): let it through with `chmod o+x %s`, or give the plugin a data dir below directories it can enter", o.name, o.uid, p, mode, p)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	if err := os.Chown(dir, o.uid, o.gid); err != nil {
		return fmt.Errorf("handing the cluster dir %s to user %s: %w", dir, o.name, err)
	}
	return nil
}

// canEnter reports whether the user may search directory p.
func (o *osUser) canEnter(p string) (bool, os.FileMode, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, 0, fmt.Errorf("checking the managed cluster's path: %w", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	mode := fi.Mode().Perm()
	ok := mode&0o001 != 0 ||
		(int(st.Uid) == o.uid && mode&0o100 != 0) ||
		(int(st.Gid) == o.gid && mode&0o010 != 0)
	return ok, mode, nil
}

// secretFile reads the secret kept in path, or makes one and keeps it there (0600,
// owned by the user, who reads it in initdb).
func (o *osUser) secretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading the superuser password: %w", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "data", "PG_VERSION")); err == nil {
		return "", fmt.Errorf("the cluster in %s exists but its superuser password file %s is gone or empty: restore it, or remove the cluster dir to start over (its databases are lost)", filepath.Dir(path), path)
	}
	password := newPassword()
	return password, o.writeFile(path, []byte(password+"\n"))
}

// writeFile writes a 0600 file owned by the user.
func (o *osUser) writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	if o.switched {
		return os.Chown(path, o.uid, o.gid)
	}
	return nil
}
