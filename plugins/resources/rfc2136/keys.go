package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"sort"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
)

// zoneKey is one deployment's TSIG key and the zone it may change.
type zoneKey struct {
	name, zone, secret string // name and zone fully qualified; secret base64
}

// The keys file is the plugin's: named.conf includes it, the plugin rewrites it whole.
// Each key has a comment line with its zone above it.
const keysHeader = "# Written by fedhost-resource-rfc2136: one TSIG key per zone, each granted updates of its zone alone. Do not edit.\n"

var (
	zoneLineRE = regexp.MustCompile(`^# zone "([a-z0-9.-]+)"$`)
	keyLineRE  = regexp.MustCompile(`^key "([a-z0-9.-]+)" \{ algorithm hmac-sha256; secret "([A-Za-z0-9+/=]+)"; \};$`)
)

// readKeys reads the keys file; a missing file holds no keys.
func readKeys(path string) (map[string]zoneKey, error) {
	keys := map[string]zoneKey{}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return keys, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the keys file: %w", err)
	}
	zone := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := zoneLineRE.FindStringSubmatch(line); m != nil {
			zone = m[1]
			continue
		}
		if m := keyLineRE.FindStringSubmatch(line); m != nil {
			keys[m[1]] = zoneKey{name: m[1], zone: zone, secret: m[2]}
			zone = ""
			continue
		}
		if line != "" && line[0] != '#' {
			return nil, fmt.Errorf("the keys file %s has a line %d the plugin did not write: the file is the plugin's alone, move other keys to a file of their own", path, n)
		}
	}
	return keys, sc.Err()
}

// writeKeys replaces the keys file atomically, readable by named's group.
func writeKeys(path string, keys map[string]zoneKey) error {
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString(keysHeader)
	for _, n := range names {
		k := keys[n]
		fmt.Fprintf(&b, "# zone %q\nkey %q { algorithm hmac-sha256; secret %q; };\n", k.zone, k.name, k.secret)
	}
	if err := atomicfile.Write(path, b.Bytes(), 0o640); err != nil {
		return fmt.Errorf("writing the keys file: %w", err)
	}
	return nil
}
