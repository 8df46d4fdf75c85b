// Package plugintest builds a plugin binary once for the tests of its package, the way
// the host finds plugins: a file named fedhost-<kind>-<name>.
package plugintest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main builds the main package of the working directory (the package under test) as
// name in a temporary directory, sets *binary to its path, runs the tests and exits with
// their code. Call it from TestMain.
func Main(m *testing.M, name string, binary *string) {
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*binary = filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", *binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
