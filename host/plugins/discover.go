package plugins

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
)

// Binary is an installed plugin binary.
type Binary struct {
	// Path is the binary's path; File its name in the plugin directory.
	Path, File string
	Kind       sdk.Kind
	Name       string
	// Version is the version in the file name (fedhost-app-miniflux_2.3.5), "" if none.
	Version string
}

// ID names the binary in logs and listings: kind/name, with @version if the file carries one.
func (b Binary) ID() string {
	if b.Version != "" {
		return fmt.Sprintf("%s/%s@%s", b.Kind, b.Name, b.Version)
	}
	return fmt.Sprintf("%s/%s", b.Kind, b.Name)
}

// Discover lists the plugin binaries of dir: executable regular files named
// fedhost-<kind>-<name>[_<version>]. Several versions of one plugin may sit side by side.
func Discover(dir string) ([]Binary, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin directory %s: %w (set --plugin-dir or FEDHOST_PLUGIN_DIR, or run `make build`)", dir, err)
	}
	var out []Binary
	for _, e := range entries {
		parsed, ok := client.ParseBinaryName(e.Name())
		if !ok {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			continue
		}
		out = append(out, Binary{
			Path:    filepath.Join(dir, e.Name()),
			File:    e.Name(),
			Kind:    parsed.Kind,
			Name:    parsed.Name,
			Version: parsed.Version,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Version < b.Version
	})
	return out, nil
}
