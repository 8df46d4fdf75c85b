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

// MainWithServer starts, for the tests of a package, the real server they share: start
// runs it with its files in a temporary directory and returns how to stop it. It runs
// the tests, stops the server, removes the directory and exits with the tests' code;
// name says which server in an error.
func MainWithServer(m *testing.M, name string, start func(dir string) (stop func(), err error)) {
	dir, err := os.MkdirTemp("", "fedhost-"+name+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop, err := start(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s test server: %v\n", name, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
}
