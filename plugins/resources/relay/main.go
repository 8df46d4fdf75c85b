// Command fedhost-resource-relay serves the smtp resource: each deployment gets a
// submission account of its own on a mail relay this plugin runs, which sends only from
// the deployment's From address and hands every message to the hosting provider's
// outgoing mail server.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	resource.Serve(sdk.Description{
		Name:           "relay",
		Version:        "0.1.0",
		Summary:        "A submission account per deployment on a relay that sends only from the deployment's address, through the hosting provider's mail server",
		Serves:         []string{"smtp"},
		SettingsSchema: settingsSchema,
	}, &provider{})
}
