package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk"
)

// rndc runs the rndc program against the primary's control channel, with the key file
// of the settings as its configuration (-c): a system rndc.conf never takes over.
type rndc struct {
	binary, server, keyFile, keyName string
	port                             int
}

var keyNameRE = regexp.MustCompile(`(?m)^\s*key\s+"?([A-Za-z0-9._-]+)"?\s*\{`)

func newRNDC(binary, address string, port int, keyFile string) (rndc, error) {
	if binary == "" {
		binary = "rndc"
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return rndc{}, sdk.Invalid("settings/rndc/binary", "%s is not an executable: install it (Debian package bind9-utils) or give its path", binary)
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return rndc{}, sdk.Invalid("settings/rndc/key_file", "reading the control channel's key: %v", err)
	}
	m := keyNameRE.FindSubmatch(b)
	if m == nil {
		return rndc{}, sdk.Invalid("settings/rndc/key_file", "%s holds no key statement: write one with rndc-confgen -a -c %s", keyFile, keyFile)
	}
	return rndc{binary: path, server: address, port: port, keyFile: keyFile, keyName: string(m[1])}, nil
}

// errNoZone is rndc's answer for a zone the server does not have.
var errNoZone = errors.New("no such zone")

func (r rndc) run(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"-c", r.keyFile, "-y", r.keyName, "-s", r.server, "-p", strconv.Itoa(r.port)}, args...)
	cmd := exec.CommandContext(ctx, r.binary, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		if len(text) > 500 {
			text = text[:500]
		}
		return text, sdk.Unavailable("rndc %s on %s port %d failed: %v: %s", args[0], r.server, r.port, err, text)
	}
	return text, nil
}

// showzone returns the configuration of zone, or errNoZone.
func (r rndc) showzone(ctx context.Context, zone string) (string, error) {
	text, err := r.run(ctx, "showzone", zone)
	if err != nil && strings.Contains(text, "not found") {
		return "", errNoZone
	}
	return text, err
}

// addzone adds a primary zone loaded from file whose updates only key may send.
func (r rndc) addzone(ctx context.Context, zone, file, key string) error {
	conf := fmt.Sprintf(`{ type primary; file %q; update-policy { grant %q zonesub ANY; }; allow-transfer { key %q; }; };`, file, key, key)
	_, err := r.run(ctx, "addzone", zone, conf)
	return err
}

// delzone removes zone and its files; a zone that is gone is not an error.
func (r rndc) delzone(ctx context.Context, zone string) error {
	text, err := r.run(ctx, "delzone", "-clean", zone)
	if err != nil && strings.Contains(text, "not found") {
		return nil
	}
	return err
}

// reconfig makes named read its configuration again, with the keys file.
func (r rndc) reconfig(ctx context.Context) error {
	_, err := r.run(ctx, "reconfig")
	return err
}

var grantRE = regexp.MustCompile(`grant\s+"?([A-Za-z0-9._-]+?)\.?"?\s+zonesub`)

// grantee returns the key a zone's configuration (from showzone) grants updates to, or "".
func grantee(conf string) string {
	m := grantRE.FindStringSubmatch(conf)
	if m == nil {
		return ""
	}
	return strings.ToLower(m[1]) + "."
}
