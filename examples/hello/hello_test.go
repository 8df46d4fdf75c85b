package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

// build compiles the package pkg of this module to dir/name.
func build(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func TestConformance(t *testing.T) {
	bin := build(t, t.TempDir(), "fedhost-app-hello", ".")
	desc := conformance.Plugin(t, bin)
	if desc.Name != "hello" {
		t.Errorf("name %q, want hello", desc.Name)
	}
	conformance.App(t, bin,
		conformance.AppCase{Name: "defaults"},
		conformance.AppCase{Name: "dark", Domain: "hello.example.net", Config: json.RawMessage(`{"greeting":"Welcome to our club","theme":"dark"}`)},
	)
}

// The node runs the program this module builds, under the name the instance provider
// finds it by in its artifacts_dir.
func TestTheNodeRunsTheServer(t *testing.T) {
	dir := t.TempDir()
	build(t, dir, binary, "./cmd/hello-server")
	results := map[string]json.RawMessage{
		requestDB:  json.RawMessage(`{"host":"127.0.0.1","port":5432,"database":"acme-hello-db","user":"acme-hello-db","password":{"secret":"acme/hello-db/password@v1"},"sslmode":"disable"}`),
		requestKey: json.RawMessage(`{"files":{"cookie-key":{"ref":"acme/hello-key/cookie-key@v1","version":1}}}`),
	}
	h := &hello{}
	if err := h.Configure(context.Background(), json.RawMessage(`{"footer":"Hosted by Example"}`)); err != nil {
		t.Fatal(err)
	}
	nodes, err := h.Render(context.Background(), app.RenderRequest{Tenant: "acme", Config: json.RawMessage(`{"greeting":"Hi"}`), Results: results})
	if err != nil {
		t.Fatal(err)
	}
	var spec contract.InstanceRequest
	if err := json.Unmarshal(nodes[0].Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Artifact.Binary != binary || spec.Artifact.Image != "" {
		t.Errorf("the node runs %+v, want the binary %s", spec.Artifact, binary)
	}
	if got := spec.Files["db-password"].Content; got != "${secret:acme/hello-db/password@v1}" {
		t.Errorf("the password file holds %q, want the placeholder of the result's reference", got)
	}
	if spec.Env["GREETING"] != "Hi" || spec.Env["PGDATABASE"] != "acme-hello-db" || spec.Env["FOOTER"] != "Hosted by Example" {
		t.Errorf("env %v does not carry the greeting, the database and the footer of the settings", spec.Env)
	}
}
