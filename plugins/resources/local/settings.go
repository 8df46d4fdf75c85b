package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk"
)

// settings are the provider's settings after defaults.
type settings struct {
	ArtifactsDir string
	PortLow      int
	PortHigh     int
	LogMaxBytes  int64
	LogKeep      int
}

const (
	defaultPortRange   = "20000-29999"
	defaultLogMaxBytes = 10 << 20
	defaultLogKeep     = 3
)

// parseSettings reads the settings block; missing keys take their defaults.
func parseSettings(raw json.RawMessage) (settings, error) {
	var in struct {
		ArtifactsDir string `json:"artifacts_dir"`
		PortRange    string `json:"port_range"`
		LogMaxBytes  int64  `json:"log_max_bytes"`
		LogKeep      int    `json:"log_keep"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &in); err != nil {
			return settings{}, sdk.Invalid("settings", "settings are not an object of the settings schema: %v", err)
		}
	}
	s := settings{ArtifactsDir: in.ArtifactsDir, LogMaxBytes: in.LogMaxBytes, LogKeep: in.LogKeep}
	if s.ArtifactsDir == "" {
		dir, err := defaultArtifactsDir()
		if err != nil {
			return settings{}, sdk.Invalid("settings/artifacts_dir", "no artifacts_dir given and the default cannot be found (%v): set artifacts_dir", err)
		}
		s.ArtifactsDir = dir
	}
	abs, err := filepath.Abs(s.ArtifactsDir)
	if err != nil {
		return settings{}, sdk.Invalid("settings/artifacts_dir", "artifacts_dir %q: %v", s.ArtifactsDir, err)
	}
	s.ArtifactsDir = abs
	if in.PortRange == "" {
		in.PortRange = defaultPortRange
	}
	s.PortLow, s.PortHigh, err = parsePortRange(in.PortRange)
	if err != nil {
		return settings{}, err
	}
	if s.LogMaxBytes == 0 {
		s.LogMaxBytes = defaultLogMaxBytes
	}
	if s.LogKeep == 0 {
		s.LogKeep = defaultLogKeep
	}
	return s, nil
}

// defaultArtifactsDir is ../artifacts beside the plugin binary's directory: bin/artifacts
// when the plugin is bin/plugins/fedhost-resource-local.
func defaultArtifactsDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Join(filepath.Dir(filepath.Dir(exe)), "artifacts"), nil
}

func parsePortRange(s string) (low, high int, err error) {
	lo, hi, ok := strings.Cut(s, "-")
	low, errLow := strconv.Atoi(lo)
	high, errHigh := strconv.Atoi(hi)
	switch {
	case !ok || errLow != nil || errHigh != nil:
		return 0, 0, sdk.Invalid("settings/port_range", "port_range %q is not LOW-HIGH, such as %s", s, defaultPortRange)
	case low < 1024 || high > 65535 || low > high:
		return 0, 0, sdk.Invalid("settings/port_range", "port_range %q must lie within 1024-65535 with LOW <= HIGH", s)
	}
	return low, high, nil
}

// binaryPath gives the path of an artifact binary in the artifacts dir, refusing a name
// that would leave it or a file that is not an executable.
func (s settings) binaryPath(name string) (string, error) {
	if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
		return "", sdk.Invalid("request/artifact/binary", "binary %q is not a plain file name in the artifacts dir", name)
	}
	path := filepath.Join(s.ArtifactsDir, name)
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", sdk.Invalid("request/artifact/binary", "binary %q is not an executable file in the artifacts dir %s: install it there or fix artifacts_dir", name, s.ArtifactsDir)
	}
	return path, nil
}

func (s settings) String() string {
	return fmt.Sprintf("artifacts_dir=%s port_range=%d-%d log_max_bytes=%d log_keep=%d", s.ArtifactsDir, s.PortLow, s.PortHigh, s.LogMaxBytes, s.LogKeep)
}
