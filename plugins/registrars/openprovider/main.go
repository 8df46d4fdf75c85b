// Command fedhost-registrar-openprovider registers, renews, transfers and locks domains
// at Openprovider through its REST API v1beta, with a bearer token from auth/login.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

func main() {
	registrar.Serve(sdk.Description{
		Name:           "openprovider",
		Version:        "0.1.0",
		Summary:        "Domains at Openprovider through the REST API v1beta",
		Serves:         []string{"*"},
		SettingsSchema: settingsSchema,
	}, &driver{})
}
