// Command fedhost is the fedhost host: it loads the plugins, keeps the store and the job
// queue, and serves the operator API and UI. Run `fedhost --help`.
package main

import (
	"os"
	// Time zones (CRON_TZ= schedules, update windows) must load on a machine without
	// /usr/share/zoneinfo too: Debian 12 requires tzdata, but minimal images and newer
	// Debian releases may lack it. The system's database is still preferred when present.
	_ "time/tzdata"

	"github.com/fedhost/fedhost/host/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
