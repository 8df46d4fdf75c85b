// Package app is the contract of application components: plugins that declare one web
// application (Miniflux, Mastodon, ...) to the host.
//
// An app gives the JSON Schema of its options, says which resources a configuration
// needs, and renders the nodes that run it from the configuration and the resources'
// results. It never talks to a server itself. The optional [Renamer], [Operator],
// [Guarded] and [RoleGrouper] add option renames, imperative operations (backup,
// restore), version guards and role groups.
//
// An app served on the web marks the string option that holds its host name under the
// deployment's domain with the schema annotation "x-hostname": true (default "feeds"
// makes feeds.<domain>). The host checks the name and refuses two enabled apps of one
// deployment that take the same; docs/plugins.md has the rules.
//
//	func main() {
//		app.Serve(sdk.Description{Name: "miniflux", Version: "2.3.5", Serves: []string{"miniflux"}}, &miniflux{})
//	}
package app
