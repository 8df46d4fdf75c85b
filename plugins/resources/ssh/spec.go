package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// metaDir is the driver's own directory in a node's working dir; logs and tmp are the
// node's log and TMPDIR.
const metaDir = ".fedhost"

var reservedNames = []string{metaDir, "logs", "tmp"}

// Health check defaults, in seconds, as the local driver has them.
const (
	defaultHealthInterval = 10
	defaultHealthTimeout  = 5
	defaultHealthStart    = 60
)

var (
	plainName         = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	envName           = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	placeholder       = regexp.MustCompile(`\$\{(host|port|url|file|secret)(?::([^}]*))?\}`)
	secretPlaceholder = regexp.MustCompile(`\$\{secret:([^}]*)\}`)
)

// plan is the effective spec of a node on its machine, every placeholder resolved. Its
// hash decides whether a provision restarts the node; it holds the hashes of the file
// contents, never the contents.
type plan struct {
	Machine     string            `json:"machine"`
	Binary      string            `json:"binary"`
	BinaryStamp string            `json:"binary_stamp"`
	Args        []string          `json:"args"`
	Env         map[string]string `json:"env"`
	Files       map[string]string `json:"files"`
	Ports       map[string]int    `json:"ports"`
	Volumes     []string          `json:"volumes"`
	Health      *contract.Health  `json:"health,omitempty"`
	ListenHost  string            `json:"listen_host"`
}

func (p plan) hash() string {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (p plan) addresses() map[string]string {
	out := map[string]string{}
	for name, port := range p.Ports {
		out[name] = net.JoinHostPort(p.ListenHost, strconv.Itoa(port))
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

// checkSpec refuses what this driver cannot run, before anything is touched, and
// returns the volume paths (clean, relative to the working dir).
func checkSpec(spec contract.InstanceRequest) ([]string, error) {
	if spec.Artifact.Image != "" {
		return nil, sdk.Invalid("request/artifact/image", "the ssh instance driver runs binaries, not OCI images: route this app's instance to a driver that runs images (incus), or give artifact.binary")
	}
	if !plainName.MatchString(spec.Artifact.Binary) {
		return nil, sdk.Invalid("request/artifact/binary", "artifact.binary is the plain file name of a binary in the machine's artifacts_dir (A-Z, a-z, 0-9, '.', '_', '-')")
	}
	ports := map[string]bool{}
	for i, p := range spec.Ports {
		if ports[p.Name] || p.Name == "" {
			return nil, sdk.Invalid(fmt.Sprintf("request/ports/%d/name", i), "each port has a name of its own")
		}
		ports[p.Name] = true
	}
	if spec.Health != nil && !ports[spec.Health.Port] {
		return nil, sdk.Invalid("request/health/port", "the health check names a port the node does not declare")
	}
	for name := range spec.Files {
		if !plainName.MatchString(name) || slices.Contains(reservedNames, name) {
			return nil, sdk.Invalid("request/files", "a file name is a plain name (A-Z, a-z, 0-9, '.', '_', '-'), not %s", strings.Join(reservedNames, ", "))
		}
	}
	for k := range spec.Env {
		if !envName.MatchString(k) {
			return nil, sdk.Invalid("request/env", "an env name is letters, digits and '_', not starting with a digit")
		}
	}
	var volumes []string
	for i, v := range spec.Volumes {
		field := fmt.Sprintf("request/volumes/%d/path", i)
		clean := path.Clean(v.Path)
		if path.IsAbs(v.Path) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, sdk.Invalid(field, "volume %d: the ssh driver keeps volumes below the node's working dir: give a relative path that stays in it", i)
		}
		top, _, _ := strings.Cut(clean, "/")
		if slices.Contains(reservedNames, top) {
			return nil, sdk.Invalid(field, "volume %d: %s is kept by the driver in the working dir: choose another path", i, top)
		}
		if _, ok := spec.Files[top]; ok {
			return nil, sdk.Invalid(field, "volume %d: its path is also a file of the node", i)
		}
		volumes = append(volumes, clean)
	}
	dry := map[string]int{}
	for name := range ports {
		dry[name] = 1
	}
	if _, _, err := expandAll(spec, "/", "127.0.0.1", dry); err != nil {
		return nil, err
	}
	return volumes, nil
}

// expand substitutes ${host}, ${port:NAME}, ${url:NAME} and ${file:NAME} in s.
func expand(s, field, workdir, host string, files map[string]contract.InstanceFile, ports map[string]int) (string, error) {
	var bad error
	out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		kind, name := sub[1], sub[2]
		switch kind {
		case "host":
			return host
		case "port":
			if p, ok := ports[name]; ok {
				return strconv.Itoa(p)
			}
			bad = sdk.Invalid(field, "a ${port:NAME} names no port of the node")
		case "url":
			if p, ok := ports[name]; ok {
				return "http://" + net.JoinHostPort(host, strconv.Itoa(p)) + "/"
			}
			bad = sdk.Invalid(field, "a ${url:NAME} names no port of the node")
		case "file":
			if _, ok := files[name]; ok {
				return path.Join(workdir, name)
			}
			bad = sdk.Invalid(field, "a ${file:NAME} names no file of the node")
		default:
			bad = sdk.Invalid(field, "secrets go into files only: put the ${secret:REF} in a file and give its path with ${file:NAME}")
		}
		return m
	})
	return out, bad
}

func expandAll(spec contract.InstanceRequest, workdir, host string, ports map[string]int) ([]string, map[string]string, error) {
	args := make([]string, len(spec.Args))
	for i, a := range spec.Args {
		v, err := expand(a, fmt.Sprintf("request/args/%d", i), workdir, host, spec.Files, ports)
		if err != nil {
			return nil, nil, err
		}
		args[i] = v
	}
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": path.Join(workdir, "tmp")}
	for k, a := range spec.Env {
		v, err := expand(a, "request/env/"+k, workdir, host, spec.Files, ports)
		if err != nil {
			return nil, nil, err
		}
		env[k] = v
	}
	return args, env, nil
}

// resolveFiles fills the ${secret:REF} placeholders of the files from the request's
// secrets; an error names the file and the reference, never a value.
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

func healthWithDefaults(h *contract.Health) *contract.Health {
	if h == nil {
		return nil
	}
	c := *h
	if c.IntervalSeconds == 0 {
		c.IntervalSeconds = defaultHealthInterval
	}
	if c.TimeoutSeconds == 0 {
		c.TimeoutSeconds = defaultHealthTimeout
	}
	if c.StartSeconds == 0 {
		c.StartSeconds = defaultHealthStart
	}
	return &c
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

// listeningPorts reads the TCP ports in the LISTEN state (st 0A) out of the text of the
// machine's /proc/net/tcp and /proc/net/tcp6.
func listeningPorts(text string) map[int]bool {
	out := map[int]bool{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		if port, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil {
			out[int(port)] = true
		}
	}
	return out
}

func sha256hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
