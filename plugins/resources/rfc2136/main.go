// Command fedhost-resource-rfc2136 gives each deployment a zone of its own on the hosting
// provider's authoritative BIND servers: the zone is added through the primary's control
// channel (rndc addzone), its records are changed by RFC 2136 dynamic update signed with a
// TSIG key of that zone alone.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	p := &provider{}
	resource.Serve(sdk.Description{
		Name:           "rfc2136",
		Version:        "0.1.0",
		Summary:        "A zone per deployment on authoritative BIND servers, changed by TSIG-signed dynamic update",
		Serves:         []string{"dns"},
		SettingsSchema: settingsSchema,
	}, p)
}
