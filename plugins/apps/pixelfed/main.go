// Command fedhost-app-pixelfed declares Pixelfed 0.12 to the fedhost host: its options, the
// resources a configuration needs, and the web and Horizon worker nodes that run it.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

func main() {
	p := newPixelfed()
	app.Serve(sdk.Description{
		Name:           "pixelfed",
		Version:        version,
		Summary:        "Pixelfed " + version + ": federated photo sharing (web and Horizon worker)",
		Serves:         []string{"pixelfed"},
		SettingsSchema: p.SettingsSchema(),
	}, p)
}
