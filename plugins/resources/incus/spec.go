package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Health check defaults, in seconds, as the local and ssh drivers have them.
const (
	defaultHealthInterval = 10
	defaultHealthTimeout  = 5
	defaultHealthStart    = 60
)

// metaDir is the driver's own directory below node_dir: the run script.
const metaDir = ".fedhost"

var (
	plainName         = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	envName           = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	placeholder       = regexp.MustCompile(`\$\{(host|port|url|file|secret)(?::([^}]*))?\}`)
	secretPlaceholder = regexp.MustCompile(`\$\{secret:([^}]*)\}`)
	// An OCI reference: [registry/]repository[:tag][@digest], lower-case as the
	// distribution spec has it.
	ociRef      = regexp.MustCompile(`^([a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?/)?[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$`)
	systemAlias = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*){0,3}$`)
)

// imageSource is the "source" of an instance created from an image (doc/rest-api.md,
// POST /1.0/instances, InstanceSource).
type imageSource struct {
	Type     string `json:"type"`
	Mode     string `json:"mode"`
	Server   string `json:"server"`
	Protocol string `json:"protocol"`
	Alias    string `json:"alias"`
}

// parseImage reads artifact.image: "images:ALIAS" is a system container from the
// settings' simplestreams server (images:debian/12); anything else an OCI reference
// ([registry/]repository[:tag][@digest], docker.io when no registry is named).
func parseImage(image, systemServer string) (imageSource, bool, error) {
	if len(image) > 512 {
		return imageSource{}, false, sdk.Invalid("request/artifact/image", "artifact.image is at most 512 characters")
	}
	if alias, ok := strings.CutPrefix(image, "images:"); ok {
		if !systemAlias.MatchString(alias) {
			return imageSource{}, false, sdk.Invalid("request/artifact/image", "a system container image is images:ALIAS, an alias of the system_image_server such as images:debian/12")
		}
		return imageSource{Type: "image", Mode: "pull", Server: systemServer, Protocol: "simplestreams", Alias: alias}, true, nil
	}
	if !ociRef.MatchString(image) {
		return imageSource{}, false, sdk.Invalid("request/artifact/image", "artifact.image is an OCI reference ([registry/]repository[:tag][@sha256:digest], lower case) or images:ALIAS for a system container")
	}
	registry, rest := "docker.io", image
	if first, after, ok := strings.Cut(image, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		registry, rest = first, after
	}
	if registry == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return imageSource{Type: "image", Mode: "pull", Server: "https://" + registry, Protocol: "oci", Alias: rest}, false, nil
}

func parseSpec(raw json.RawMessage) (contract.InstanceRequest, error) {
	var spec contract.InstanceRequest
	if err := json.Unmarshal(raw, &spec); err != nil {
		return spec, sdk.Invalid("request", "the request is not an instance node spec: %v", err)
	}
	return spec, nil
}

// checkSpec refuses what this driver cannot run, before the server is asked anything.
func checkSpec(spec contract.InstanceRequest, cfg settings) (imageSource, bool, error) {
	if spec.Artifact.Binary != "" {
		return imageSource{}, false, sdk.Invalid("request/artifact/binary", "the incus instance driver runs images, not binaries: give artifact.image (an OCI reference or images:ALIAS), or route this app's instance to the local or ssh driver")
	}
	if spec.Artifact.Image == "" {
		return imageSource{}, false, sdk.Invalid("request/artifact/image", "give artifact.image: an OCI reference or images:ALIAS")
	}
	src, system, err := parseImage(spec.Artifact.Image, cfg.SystemImageServer)
	if err != nil {
		return src, system, err
	}
	if system && len(spec.Args) == 0 {
		return src, system, sdk.Invalid("request/args", "a system container runs the node's args as a systemd service: give args")
	}
	if len(spec.Ports) > 32 {
		return src, system, sdk.Invalid("request/ports", "at most 32 ports")
	}
	ports := map[string]bool{}
	for i, p := range spec.Ports {
		if ports[p.Name] || p.Name == "" {
			return src, system, sdk.Invalid(fmt.Sprintf("request/ports/%d/name", i), "each port has a name of its own")
		}
		ports[p.Name] = true
	}
	if spec.Health != nil && !ports[spec.Health.Port] {
		return src, system, sdk.Invalid("request/health/port", "the health check names a port the node does not declare")
	}
	for name := range spec.Files {
		if !plainName.MatchString(name) || name == metaDir {
			return src, system, sdk.Invalid("request/files", "a file name is a plain name (A-Z, a-z, 0-9, '.', '_', '-'), not %s", metaDir)
		}
	}
	for k, v := range spec.Env {
		if !envName.MatchString(k) {
			return src, system, sdk.Invalid("request/env", "an env name is letters, digits and '_', not starting with a digit")
		}
		if len(v) > 64<<10 {
			return src, system, sdk.Invalid("request/env/"+k, "an env value is at most 64 KiB")
		}
	}
	seen := map[string]bool{}
	for i, v := range spec.Volumes {
		field := fmt.Sprintf("request/volumes/%d", i)
		if seen[v.Name] {
			return src, system, sdk.Invalid(field+"/name", "each volume has a name of its own")
		}
		seen[v.Name] = true
		p := volumePath(v.Path, cfg.NodeDir)
		if p == "/" || !plainPath.MatchString(v.Path) || strings.Contains(v.Path, "..") {
			return src, system, sdk.Invalid(field+"/path", "volume %d: give an absolute path in the instance, or one relative to node_dir, without '..'", i)
		}
		if p == cfg.NodeDir || p == path.Join(cfg.NodeDir, metaDir) {
			return src, system, sdk.Invalid(field+"/path", "volume %d: %s is the driver's: choose another path", i, p)
		}
		if _, ok := spec.Files[strings.TrimPrefix(p, cfg.NodeDir+"/")]; ok && path.Dir(p) == cfg.NodeDir {
			return src, system, sdk.Invalid(field+"/path", "volume %d: its path is also a file of the node", i)
		}
	}
	dry := map[string]int{}
	for name := range ports {
		dry[name] = 1
	}
	if _, _, err := expandAll(spec, cfg.NodeDir, cfg.ListenHost, dry); err != nil {
		return src, system, err
	}
	return src, system, nil
}

func volumePath(p, nodeDir string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(nodeDir, p)
}

// expand substitutes ${host}, ${port:NAME}, ${url:NAME} and ${file:NAME} in s. In the
// instance the node listens on 127.0.0.1 (${host}) at the port number it has on the
// Incus machine, where a proxy device listens on listen_host and connects to it.
func expand(s, field, nodeDir, listenHost string, files map[string]contract.InstanceFile, ports map[string]int) (string, error) {
	var bad error
	out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		kind, name := sub[1], sub[2]
		switch kind {
		case "host":
			return "127.0.0.1"
		case "port":
			if p, ok := ports[name]; ok {
				return strconv.Itoa(p)
			}
			bad = sdk.Invalid(field, "a ${port:NAME} names no port of the node")
		case "url":
			if p, ok := ports[name]; ok {
				return "http://" + net.JoinHostPort(listenHost, strconv.Itoa(p)) + "/"
			}
			bad = sdk.Invalid(field, "a ${url:NAME} names no port of the node")
		case "file":
			if _, ok := files[name]; ok {
				return path.Join(nodeDir, name)
			}
			bad = sdk.Invalid(field, "a ${file:NAME} names no file of the node")
		default:
			bad = sdk.Invalid(field, "secrets go into files only: put the ${secret:REF} in a file and give its path with ${file:NAME}")
		}
		return m
	})
	return out, bad
}

func expandAll(spec contract.InstanceRequest, nodeDir, listenHost string, ports map[string]int) ([]string, map[string]string, error) {
	args := make([]string, len(spec.Args))
	for i, a := range spec.Args {
		v, err := expand(a, fmt.Sprintf("request/args/%d", i), nodeDir, listenHost, spec.Files, ports)
		if err != nil {
			return nil, nil, err
		}
		args[i] = v
	}
	env := map[string]string{}
	for k, a := range spec.Env {
		v, err := expand(a, "request/env/"+k, nodeDir, listenHost, spec.Files, ports)
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

// runScript is the node's command: for a system container its environment is exported
// too (systemd does not pass the instance's environment.* keys to services), and it
// runs in node_dir; an OCI container keeps the image's working dir.
func runScript(args []string, env map[string]string, nodeDir string, system bool) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	if system {
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "export %s=%s\n", k, shq(env[k]))
		}
		fmt.Fprintf(&b, "cd %s || exit 1\n", shq(nodeDir))
	}
	b.WriteString("exec")
	for _, a := range args {
		b.WriteString(" " + shq(a))
	}
	b.WriteString("\n")
	return b.String()
}

// systemdUnit runs the node in a system container and restarts it when it exits.
func systemdUnit(script string) string {
	return "[Unit]\nDescription=fedhost node\nAfter=network-online.target\n\n[Service]\nExecStart=/bin/sh " + script +
		"\nRestart=always\nRestartSec=1\n\n[Install]\nWantedBy=multi-user.target\n"
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// scrub replaces every secret value in s by a mention of its reference.
func scrub(s string, secrets map[string][]byte) string {
	for ref, v := range secrets {
		if len(v) > 0 {
			s = strings.ReplaceAll(s, string(v), "[secret "+ref+"]")
		}
	}
	return s
}

func sha256hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// instanceName is the node's instance: tenant and instance (cut to fit) and a hash of
// both, so that "a-b"/"c" and "a"/"b-c" differ; at most 58 characters, as Incus takes.
func instanceName(tenant, instance string) string {
	h := sha256.Sum256([]byte(tenant + "/" + instance))
	return fmt.Sprintf("%s-%s-%s", cut(tenant, 20), cut(instance, 28), hex.EncodeToString(h[:4]))
}

func volumeName(inst, volume string) string { return inst + "-" + volume }

func cut(s string, n int) string {
	if len(s) > n {
		s = strings.TrimRight(s[:n], "-")
	}
	return s
}
