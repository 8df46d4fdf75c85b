// Command fedhost is the fedhost host: it loads the plugins, keeps the store and the job
// queue, and serves the operator API and UI. Run `fedhost --help`.
package main

import (
	"os"

	"github.com/fedhost/fedhost/host/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
