package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
	"github.com/fedhost/fedhost/sdk"
)

// The plugin's records of the routes it was given, from which Caddy gets every route back
// after it or the plugin restarts:
//
//	routes/<tenant>/<instance>.json  hosts, upstream and certificate chain, 0600
//	routes/<tenant>/<instance>.key   the certificate's private key, 0600
const routesDir = "routes"

// record is one route as provisioned.
type record struct {
	Tenant      string   `json:"tenant"`
	Instance    string   `json:"instance"`
	Hosts       []string `json:"hosts"`
	Upstream    string   `json:"upstream"`
	Certificate string   `json:"certificate,omitempty"`
	key         []byte
}

func (r *record) tls() bool { return r.Certificate != "" }

// same reports whether r and o would give Caddy the same route.
func (r *record) same(o *record) bool {
	return r.Tenant == o.Tenant && r.Instance == o.Instance && slices.Equal(r.Hosts, o.Hosts) &&
		r.Upstream == o.Upstream && r.Certificate == o.Certificate && string(r.key) == string(o.key)
}

type store struct{ dir string }

func (s store) paths(tenant, instance string) (jsonPath, keyPath string) {
	base := filepath.Join(s.dir, routesDir, tenant, instance)
	return base + ".json", base + ".key"
}

// load reads every record. A record that cannot be read stops the load: serving without
// it would drop a route silently.
func (s store) load() ([]*record, error) {
	var out []*record
	root := filepath.Join(s.dir, routesDir)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == root {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil || !sdk.ValidTenant(r.Tenant) || !sdk.ValidInstance(r.Instance) {
			return fmt.Errorf("%s is not a route record: remove it and provision the route again", path)
		}
		if r.tls() {
			if r.key, err = os.ReadFile(strings.TrimSuffix(path, ".json") + ".key"); err != nil {
				return fmt.Errorf("the key of the route in %s: %w", path, err)
			}
		}
		out = append(out, &r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the route records: %w", err)
	}
	return out, nil
}

// save writes r, the key first so that a record never names a key that is not there.
func (s store) save(r *record) error {
	jsonPath, keyPath := s.paths(r.Tenant, r.Instance)
	if err := os.MkdirAll(filepath.Dir(jsonPath), 0o700); err != nil {
		return fmt.Errorf("making the route records directory: %w", err)
	}
	if r.tls() {
		if err := writeFile(keyPath, r.key); err != nil {
			return err
		}
	} else if err := os.Remove(keyPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeFile(jsonPath, b)
}

func (s store) remove(tenant, instance string) error {
	jsonPath, keyPath := s.paths(tenant, instance)
	for _, p := range []string{jsonPath, keyPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the route record: %w", err)
		}
	}
	_ = os.Remove(filepath.Dir(jsonPath)) // the tenant's directory, when it is empty now
	return nil
}

// writeFile replaces path with b, 0600, so that a crash leaves the old file or the new one.
func writeFile(path string, b []byte) error { return atomicfile.Write(path, b, 0o600) }
