// Command fedhost-resource-builtin is an OpenID provider for every deployment in one
// process: each deployment's issuer (https://auth.<domain>/) is served from one plain
// HTTP listener behind the front door, signs its users in against the deployment's
// directory and registers a client for each oidc request.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	p := newProvider()
	resource.Serve(sdk.Description{
		Name:           "builtin",
		Version:        "0.1.0",
		Summary:        "An OpenID provider per deployment, signing users in against the deployment's directory",
		Serves:         []string{"oidc"},
		SettingsSchema: settingsSchema,
	}, p)
	p.close()
}
