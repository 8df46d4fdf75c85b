// Command fedhost-registrar-porkbun registers, renews, transfers in and delegates domains
// through Porkbun's JSON API v3, with the account's API key pair read from files.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

func main() {
	registrar.Serve(sdk.Description{
		Name:           "porkbun",
		Version:        "0.1.0",
		Summary:        "Domains registered, renewed, transferred in and delegated at Porkbun (API v3)",
		Serves:         []string{"*"},
		SettingsSchema: settingsSchema,
	}, &driver{})
}
