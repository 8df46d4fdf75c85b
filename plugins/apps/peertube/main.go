// Command fedhost-app-peertube declares PeerTube 7.2 to the fedhost host: its options, the
// resources a configuration needs, and the node that runs it.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

func main() {
	p := newPeerTube()
	app.Serve(sdk.Description{
		Name:           "peertube",
		Version:        version,
		Summary:        "PeerTube " + version + ": federated video hosting with transcoding and object storage",
		Serves:         []string{"peertube"},
		SettingsSchema: p.SettingsSchema(),
	}, p)
}
