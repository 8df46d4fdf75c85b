package appkit

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Node builds one instance request (a node spec).
type Node struct {
	name    string
	spec    contract.InstanceRequest
	secrets []secretEnv
	lines   []string
	command []string
}

type secretEnv struct {
	name, prefix, ref string
}

// NewNode starts the spec of the node name (DNS-safe, unique within the app) for an OCI
// image.
func NewNode(name, image string) *Node {
	return &Node{name: name, spec: contract.InstanceRequest{
		Artifact: contract.Artifact{Image: image},
		Env:      map[string]string{},
		Files:    map[string]contract.InstanceFile{},
	}}
}

// Nodes marshals nodes in order.
func Nodes(nodes ...*Node) ([]app.Node, error) {
	out := make([]app.Node, 0, len(nodes))
	for _, n := range nodes {
		m, err := n.Marshal()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Env sets a plain environment variable.
func (n *Node) Env(name, value string) *Node {
	n.spec.Env[name] = value
	return n
}

// SecretEnv gives the process the secret ref as the environment variable name.
func (n *Node) SecretEnv(name, ref string) *Node { return n.SecretEnvPrefixed(name, "", ref) }

// SecretEnvPrefixed is SecretEnv with a literal prefix before the value (Laravel's
// "base64:" on APP_KEY, say).
func (n *Node) SecretEnvPrefixed(name, prefix, ref string) *Node {
	file := SecretFile(n, strings.ToLower(strings.ReplaceAll(name, "_", "-")), ref)
	n.secrets = append(n.secrets, secretEnv{name: name, prefix: prefix, ref: file})
	return n
}

// SecretFile writes the secret ref to a file of the node and returns the name of the
// environment variable that holds the file's path.
func SecretFile(n *Node, file, ref string) string {
	n.spec.Files["secret-"+file] = contract.InstanceFile{Content: "${secret:" + ref + "}"}
	v := "FEDHOST_SECRET_" + strings.ToUpper(strings.ReplaceAll(file, "-", "_"))
	n.spec.Env[v] = "${file:secret-" + file + "}"
	return v
}

// File adds a literal file and returns the name of the environment variable that holds
// its path. The content must not hold "${": the host reads that as a placeholder.
func (n *Node) File(name, content string) string {
	n.spec.Files[name] = contract.InstanceFile{Content: content}
	v := "FEDHOST_FILE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
	n.spec.Env[v] = "${file:" + name + "}"
	return v
}

// Shell adds a line to the start script, run after the secrets are exported and before
// the command. It must not hold "${".
func (n *Node) Shell(line string) *Node {
	n.lines = append(n.lines, line)
	return n
}

// Command sets the process to run; without secrets or shell lines it is the node's args.
func (n *Node) Command(args ...string) *Node {
	n.command = args
	return n
}

// Port adds a named HTTP port.
func (n *Node) Port(name string) *Node {
	n.spec.Ports = append(n.spec.Ports, contract.Port{Name: name, Protocol: "http"})
	return n
}

// Health sets an HTTP health check on port.
func (n *Node) Health(port, path string, startSeconds int) *Node {
	n.spec.Health = &contract.Health{Port: port, HTTPPath: path, IntervalSeconds: 30, TimeoutSeconds: 10, StartSeconds: startSeconds}
	return n
}

// Volume adds persistent storage at path.
func (n *Node) Volume(name, path string) *Node {
	n.spec.Volumes = append(n.spec.Volumes, contract.Volume{Name: name, Path: path})
	return n
}

// Limits bounds memory and CPU.
func (n *Node) Limits(memoryMB, cpuMillis int) *Node {
	n.spec.Limits = &contract.Limits{MemoryMB: memoryMB, CPUMillis: cpuMillis}
	return n
}

// Script returns the start script: export each secret from its file, run the shell lines,
// then exec the command given as the script's arguments.
func (n *Node) Script() string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	sort.Slice(n.secrets, func(i, j int) bool { return n.secrets[i].name < n.secrets[j].name })
	for _, s := range n.secrets {
		fmt.Fprintf(&b, "export %s=\"%s$(cat \"$%s\")\"\n", s.name, s.prefix, s.ref)
	}
	for _, l := range n.lines {
		b.WriteString(l + "\n")
	}
	b.WriteString("exec \"$@\"\n")
	return b.String()
}

// Marshal returns the node with its spec as JSON.
func (n *Node) Marshal() (app.Node, error) {
	spec := n.spec
	if len(n.secrets) > 0 || len(n.lines) > 0 {
		spec.Args = append([]string{"/bin/sh", "-c", n.Script(), "fedhost-start"}, n.command...)
	} else {
		spec.Args = n.command
	}
	if len(spec.Env) == 0 {
		spec.Env = nil
	}
	if len(spec.Files) == 0 {
		spec.Files = nil
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return app.Node{}, fmt.Errorf("encoding the spec of node %s: %w", n.name, err)
	}
	return app.Node{Name: n.name, Spec: b}, nil
}

// Bool renders a boolean the way env-configured apps read it.
func Bool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
