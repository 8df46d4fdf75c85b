// Command fedhost-resource-redis gives each application an ACL user on a shared Redis
// server of the hosting provider, limited to the keys and channels under its own prefix.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	p := &provider{}
	resource.Serve(sdk.Description{
		Name:           "redis",
		Version:        "0.1.0",
		Summary:        "An ACL user and key prefix per application on a shared Redis server",
		Serves:         []string{"redis"},
		SettingsSchema: settingsSchema,
	}, p)
	p.close()
}
