package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fedhost/fedhost/sdk/conformance"
)

func TestConformance(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fedhost-app-hello")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	desc := conformance.Plugin(t, bin)
	if desc.Name != "hello" {
		t.Errorf("name %q, want hello", desc.Name)
	}
}
