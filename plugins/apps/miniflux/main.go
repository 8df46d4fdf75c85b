// Command fedhost-app-miniflux declares Miniflux to fedhost: its options, the resources a
// configuration needs (a PostgreSQL database, a generated admin password, a backups
// bucket, and an OpenID client when single sign-on is on) and the node that runs it.
package main

import "github.com/fedhost/fedhost/sdk/app"

func main() {
	app.Serve(describe(), miniflux{})
}
