// Command fedhost-resource-postgresql gives each application a PostgreSQL role and a
// database it owns, on a shared server of the hosting provider or on a cluster the plugin
// runs itself in its data dir (the embedded default).
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	p := &provider{}
	resource.Serve(sdk.Description{
		Name:           "postgresql",
		Version:        "0.1.0",
		Summary:        "A PostgreSQL role and database per application, on a shared server or a managed local cluster",
		Serves:         []string{"postgresql"},
		SettingsSchema: settingsSchema,
	}, p)
	// Serve returns when the host stops the plugin gracefully: stop the managed cluster
	// with it. A plugin killed outright takes the cluster down through Pdeathsig.
	p.close()
}
