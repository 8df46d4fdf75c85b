// Command fedhost-app-mastodon declares Mastodon 4.3 to the fedhost host: its options, the
// resources a configuration needs, and the web, streaming and sidekiq nodes that run it.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

func main() {
	m := newMastodon()
	app.Serve(sdk.Description{
		Name:           "mastodon",
		Version:        version,
		Summary:        "Mastodon " + version + ": decentralised social network server (web, streaming and sidekiq)",
		Serves:         []string{"mastodon"},
		SettingsSchema: m.SettingsSchema(),
	}, m)
}
