package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// loopback is the address nodes listen on and the value of ${host}.
const loopback = "127.0.0.1"

// Names in a node's working dir that the provider keeps for itself.
var reservedNames = []string{"logs", "tmp", stateFile, stateFile + ".tmp"}

// Health check defaults, in seconds.
const (
	defaultHealthInterval = 10
	defaultHealthTimeout  = 5
	defaultHealthStart    = 60
)

// plan is the effective spec of a node: what it runs, with every placeholder resolved.
// Its hash decides whether a provision restarts the node. It holds the hashes of file
// contents, never the contents (they may hold secrets).
type plan struct {
	Binary      string            `json:"binary"`
	BinaryStamp string            `json:"binary_stamp"`
	Args        []string          `json:"args"`
	Env         map[string]string `json:"env"`
	Files       map[string]string `json:"files"`
	Ports       map[string]int    `json:"ports"`
	Volumes     []string          `json:"volumes"`
	Health      *contract.Health  `json:"health,omitempty"`
	MemoryMB    int               `json:"memory_mb,omitempty"`
}

func (p plan) hash() string {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// addresses maps each port name to host:port.
func (p plan) addresses() map[string]string {
	out := map[string]string{}
	for name, port := range p.Ports {
		out[name] = loopback + ":" + strconv.Itoa(port)
	}
	return out
}

func parseSpec(raw json.RawMessage) (contract.InstanceRequest, error) {
	var spec contract.InstanceRequest
	if err := json.Unmarshal(raw, &spec); err != nil {
		return spec, sdk.Invalid("request", "the request is not an instance node spec: %v", err)
	}
	return spec, nil
}

// checkSpec refuses what this provider cannot run, before anything is created: an OCI
// image, a binary outside the artifacts dir, placeholders naming no port or file, volumes
// outside the working dir. It returns the binary's path and the volume paths.
func checkSpec(cfg settings, spec contract.InstanceRequest) (string, []string, error) {
	if spec.Artifact.Image != "" {
		return "", nil, sdk.Invalid("request/artifact/image", "the local instance provider runs binaries, not OCI images: route this app's instance to a provider that runs images (incus), or give artifact.binary")
	}
	bin, err := cfg.binaryPath(spec.Artifact.Binary)
	if err != nil {
		return "", nil, err
	}
	ports := map[string]bool{}
	for i, p := range spec.Ports {
		if ports[p.Name] {
			return "", nil, sdk.Invalid(fmt.Sprintf("request/ports/%d/name", i), "port %q is named twice", p.Name)
		}
		ports[p.Name] = true
	}
	if spec.Health != nil && !ports[spec.Health.Port] {
		return "", nil, sdk.Invalid("request/health/port", "the health check names port %q, which the node does not declare", spec.Health.Port)
	}
	for name := range spec.Files {
		if slices.Contains(reservedNames, name) {
			return "", nil, sdk.Invalid("request/files/"+name, "file name %q is kept by the provider in the working dir: choose another", name)
		}
	}
	var volumes []string
	for i, v := range spec.Volumes {
		field := fmt.Sprintf("request/volumes/%d/path", i)
		if filepath.IsAbs(v.Path) {
			return "", nil, sdk.Invalid(field, "volume %q: the local instance provider keeps volumes below the node's working dir: give a relative path", v.Name)
		}
		clean := filepath.Clean(v.Path)
		if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			return "", nil, sdk.Invalid(field, "volume %q: path %q leaves the node's working dir", v.Name, v.Path)
		}
		top, _, _ := strings.Cut(clean, "/")
		if slices.Contains(reservedNames, top) {
			return "", nil, sdk.Invalid(field, "volume %q: %q is kept by the provider in the working dir: choose another path", v.Name, top)
		}
		if _, ok := spec.Files[top]; ok {
			return "", nil, sdk.Invalid(field, "volume %q: path %q is also a file of the node", v.Name, v.Path)
		}
		for _, other := range volumes {
			if within(clean, other) || within(other, clean) {
				return "", nil, sdk.Invalid(field, "volume %q: path %q overlaps another volume", v.Name, v.Path)
			}
		}
		volumes = append(volumes, clean)
	}
	// A dry run of the substitutions finds placeholders that name nothing.
	dry := map[string]int{}
	for name := range ports {
		dry[name] = 1
	}
	if _, _, err := expandAll(spec, "/", dry); err != nil {
		return "", nil, err
	}
	return bin, volumes, nil
}

// within reports whether path is dir or below it (both clean and relative).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

var (
	placeholder       = regexp.MustCompile(`\$\{(host|port|url|file|secret)(?::([^}]*))?\}`)
	secretPlaceholder = regexp.MustCompile(`\$\{secret:([^}]*)\}`)
)

// expand substitutes ${host}, ${port:NAME}, ${url:NAME} and ${file:NAME} in s; field
// names s in errors. No proxy stands in front of local nodes: a port's URL is its
// loopback address over plain HTTP.
func expand(s, field, workdir string, files map[string]contract.InstanceFile, ports map[string]int) (string, error) {
	var bad error
	out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		kind, name := sub[1], sub[2]
		switch kind {
		case "host":
			return loopback
		case "port":
			if p, ok := ports[name]; ok {
				return strconv.Itoa(p)
			}
			bad = sdk.Invalid(field, "${port:%s} names no port of the node", name)
		case "url":
			if p, ok := ports[name]; ok {
				return "http://" + net.JoinHostPort(loopback, strconv.Itoa(p)) + "/"
			}
			bad = sdk.Invalid(field, "${url:%s} names no port of the node", name)
		case "file":
			if _, ok := files[name]; ok {
				return filepath.Join(workdir, name)
			}
			bad = sdk.Invalid(field, "${file:%s} names no file of the node", name)
		default:
			bad = sdk.Invalid(field, "${secret:%s}: secrets go into files only; put it in a file and give its path with ${file:NAME}", name)
		}
		return m
	})
	return out, bad
}

// expandAll substitutes the placeholders of the args and env.
func expandAll(spec contract.InstanceRequest, workdir string, ports map[string]int) ([]string, map[string]string, error) {
	args := make([]string, len(spec.Args))
	for i, a := range spec.Args {
		v, err := expand(a, fmt.Sprintf("request/args/%d", i), workdir, spec.Files, ports)
		if err != nil {
			return nil, nil, err
		}
		args[i] = v
	}
	env := map[string]string{}
	for k, a := range spec.Env {
		v, err := expand(a, "request/env/"+k, workdir, spec.Files, ports)
		if err != nil {
			return nil, nil, err
		}
		env[k] = v
	}
	return args, env, nil
}

// resolveFiles fills the ${secret:REF} placeholders of the files from the request's
// secrets. An error names the file and the reference, never a value.
func resolveFiles(spec contract.InstanceRequest, secrets map[string][]byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, f := range spec.Files {
		var missing string
		content := secretPlaceholder.ReplaceAllStringFunc(f.Content, func(m string) string {
			ref := secretPlaceholder.FindStringSubmatch(m)[1]
			v, ok := secrets[ref]
			if !ok {
				missing = ref
				return m
			}
			return string(v)
		})
		if missing != "" {
			return nil, sdk.Invalid("request/files/"+name, "file %q refers to secret %q, which the request does not carry: provision the secret first", name, missing)
		}
		out[name] = []byte(content)
	}
	return out, nil
}

// buildPlan resolves spec into the effective spec of the node in workdir.
func buildPlan(spec contract.InstanceRequest, bin, workdir string, volumes []string, ports map[string]int, files map[string][]byte) (plan, error) {
	fi, err := os.Stat(bin)
	if err != nil {
		return plan{}, fmt.Errorf("reading artifact %s: %w", bin, err)
	}
	args, env, err := expandAll(spec, workdir, ports)
	if err != nil {
		return plan{}, err
	}
	pl := plan{
		Binary:      bin,
		BinaryStamp: fmt.Sprintf("%d-%d", fi.Size(), fi.ModTime().UnixNano()),
		Args:        args,
		Env:         processEnv(workdir, env),
		Files:       map[string]string{},
		Ports:       ports,
		Volumes:     volumes,
	}
	for name, content := range files {
		sum := sha256.Sum256(content)
		pl.Files[name] = hex.EncodeToString(sum[:])
	}
	if spec.Health != nil {
		h := *spec.Health
		if h.IntervalSeconds == 0 {
			h.IntervalSeconds = defaultHealthInterval
		}
		if h.TimeoutSeconds == 0 {
			h.TimeoutSeconds = defaultHealthTimeout
		}
		if h.StartSeconds == 0 {
			h.StartSeconds = defaultHealthStart
		}
		pl.Health = &h
	}
	if spec.Limits != nil {
		pl.MemoryMB = spec.Limits.MemoryMB
	}
	return pl, nil
}

// processEnv is the whole environment of a node: PATH, HOME and TMPDIR, then the spec's
// env over them. Nothing of the plugin's own environment reaches the node.
func processEnv(workdir string, env map[string]string) map[string]string {
	out := map[string]string{
		"PATH":   "/usr/local/bin:/usr/bin:/bin",
		"HOME":   workdir,
		"TMPDIR": filepath.Join(workdir, "tmp"),
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// scrub replaces every secret value in s by a mention of its reference.
func scrub(s string, secrets map[string][]byte) string {
	for ref, v := range secrets {
		if len(v) > 0 {
			s = strings.ReplaceAll(s, string(v), "[secret "+ref+"]")
		}
	}
	return s
}
