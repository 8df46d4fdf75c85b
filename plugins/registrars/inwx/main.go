// Command fedhost-registrar-inwx registers, renews, transfers and locks domains at INWX
// through its DomRobot API (JSON-RPC), logged in with a session cookie.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

func main() {
	registrar.Serve(sdk.Description{
		Name:           "inwx",
		Version:        "0.1.0",
		Summary:        "Domains at INWX through the DomRobot JSON-RPC API",
		Serves:         []string{"*"},
		SettingsSchema: settingsSchema,
	}, &driver{})
}
