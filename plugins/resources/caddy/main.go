// Command fedhost-resource-caddy is fedhost's front door: it serves the route resource on
// a Caddy server, its own child (managed, the embedded default) or one already running,
// configured through Caddy's admin API on a Unix socket.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	p := newProvider()
	resource.Serve(sdk.Description{
		Name:           "caddy",
		Version:        "0.1.0",
		Summary:        "Routes from host names to an app's node, with the app's certificate, on a managed or running Caddy",
		Serves:         []string{"route"},
		SettingsSchema: settingsSchema,
	}, p)
	// Serve returns when the host stops the plugin gracefully: stop the managed Caddy with
	// it. A plugin killed outright takes Caddy down through Pdeathsig.
	p.close()
}
