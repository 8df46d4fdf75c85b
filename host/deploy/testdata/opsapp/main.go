// Command opsapp is the app plugin of the engine's tests of runs: one node (the local
// provider's test node, httpserver) and operations that run a shell (the artifact sh)
// in it: echo prints its input and its secret input (the host must take the secret out
// of the output), sleep outlives its 1 s timeout, wait waits to be canceled, token
// has sensitive output, and flood prints more than a run keeps.
package main

import (
	"context"
	"encoding/json"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

type opsapp struct{}

func (opsapp) Schema(context.Context) (app.Schema, error) {
	return app.Schema{JSON: json.RawMessage(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {}}`)}, nil
}

func (opsapp) Requests(context.Context, app.RequestsRequest) ([]app.ResourceRequest, error) {
	return nil, nil
}

func (opsapp) Render(context.Context, app.RenderRequest) ([]app.Node, error) {
	spec, _ := json.Marshal(contract.InstanceRequest{
		Artifact: contract.Artifact{Binary: "httpserver"},
		Env:      map[string]string{"LISTEN_ADDR": "${host}:${port:http}", "DATA_DIR": "data", "TOKEN_FILE": "${file:token}"},
		Files:    map[string]contract.InstanceFile{"token": {Content: "node-token"}},
		Ports:    []contract.Port{{Name: "http", Protocol: "http"}},
		Health:   &contract.Health{Port: "http", HTTPPath: "/healthz", IntervalSeconds: 1, StartSeconds: 20},
		Volumes:  []contract.Volume{{Name: "data", Path: "data"}},
	})
	return []app.Node{{Name: "web", Spec: spec}}, nil
}

// childThenSleep starts a background sleep, prints its pid and sleeps.
const childThenSleep = "sleep 300 & echo $!; sleep 300"

func (opsapp) Operations(context.Context) ([]app.Operation, error) {
	return []app.Operation{
		{Name: "echo", Title: "Echo", Description: "Print the message and the secret", NeedsRunning: true,
			Input: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["message", "secret"], "properties": {
				"message": {"type": "string", "maxLength": 100}, "secret": {"type": "string", "writeOnly": true, "minLength": 8},
				"times": {"type": "integer", "default": 1}}}`)},
		{Name: "sleep", Description: "Outlive the timeout", TimeoutSeconds: 1},
		{Name: "wait", Description: "Wait to be canceled"},
		{Name: "token", Description: "Print the node's token", Sensitive: true},
		{Name: "flood", Description: "Print 1.5 MiB"},
	}, nil
}

func (opsapp) Command(_ context.Context, req app.CommandRequest) (app.Command, error) {
	var in struct {
		Message string `json:"message"`
		Secret  string `json:"secret"`
		Times   int    `json:"times"`
	}
	_ = json.Unmarshal(req.Input, &in)
	cmd := app.Command{Node: "web", Binary: "sh"}
	switch req.Operation {
	case "echo":
		cmd.Args = []string{"-c", `read -r s; i=0; while [ $i -lt "$2" ]; do echo "message=$1"; i=$((i+1)); done; echo "the secret is $s"; echo "secret on stderr: $s" >&2`,
			"sh", in.Message, itoa(in.Times)}
		cmd.Stdin = []byte(in.Secret + "\n")
	case "sleep", "wait":
		cmd.Args = []string{"-c", childThenSleep}
	case "flood":
		cmd.Args = []string{"-c", `head -c 1572864 /dev/zero | tr '\0' x; echo; echo done`}
	case "token":
		cmd.Args = []string{"-c", `cat "$1"`, "sh", "${file:token}"}
	default:
		return app.Command{}, sdk.Errorf(sdk.CodeNotFound, "no operation %s", req.Operation)
	}
	return cmd, nil
}

func (opsapp) RoleGroups(context.Context) ([]app.RoleGroup, error) {
	return []app.RoleGroup{{Name: "ops-admins", Roles: []string{"admin"}}, {Name: "ops-users", Roles: []string{"user"}}}, nil
}

// RoleSync prints its input; it fails while a user named fail is an admin.
func (opsapp) RoleSync(_ context.Context, _ app.CommandRequest, in app.RoleSyncInput) (app.Command, error) {
	b, err := json.Marshal(in.Members)
	if err != nil {
		return app.Command{}, err
	}
	return app.Command{Node: "web", Binary: "sh", Args: []string{"-c", `cat; echo; case "$1" in *'"fail"'*) exit 3;; esac`, "sh", string(b)}, Stdin: b}, nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func main() {
	app.Serve(sdk.Description{Name: "opsapp", Version: "1.0.0", Serves: []string{"opsapp"}}, opsapp{})
}

var (
	_ app.Commander   = opsapp{}
	_ app.RoleGrouper = opsapp{}
	_ app.RoleSyncer  = opsapp{}
)
