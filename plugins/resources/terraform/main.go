// Command fedhost-resource-terraform answers resource types with a hosting provider's
// Terraform modules: the request becomes the module's variables, its outputs the result,
// and the state lives in the host (its http state backend, one workspace per tenant and
// instance).
package main

import (
	"encoding/json"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	resource.Serve(sdk.Description{
		Name:           "terraform",
		Version:        "0.1.0",
		Summary:        "Resources made by the hosting provider's Terraform modules, their state kept by the host",
		Serves:         served,
		SettingsSchema: json.RawMessage(settingsSchema),
	}, newProvider())
}
