// Command fedhost-resource-versitygw gives each application S3 buckets and keys on a
// versitygw gateway: a shared one of the hosting provider, or one the plugin runs itself
// in its data dir with the posix backend (the embedded default).
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	p := &provider{}
	resource.Serve(sdk.Description{
		Name:           "versitygw",
		Version:        "0.1.0",
		Summary:        "S3 buckets and keys with per-bucket grants on a shared or managed versitygw gateway",
		Serves:         []string{"s3"},
		SettingsSchema: settingsSchema,
	}, p)
	// Serve returns when the host stops the plugin gracefully: stop the managed gateway
	// with it. A plugin killed outright takes the gateway down through Pdeathsig.
	p.close()
}
