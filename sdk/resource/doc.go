// Package resource is the contract of resource providers: plugins that give an
// application what it asks for (a database, a bucket and key, secrets, an instance to run
// on, ...) on a server of the hosting provider.
//
// A provider implements [Provider] and, where it can, the optional [Validator],
// [StatusReporter], [Revealer], [Executor] (instance providers that run an app's
// operations in its nodes) and [sdk.Configurer], then serves itself from main:
//
//	func main() {
//		resource.Serve(sdk.Description{
//			Name:    "postgresql",
//			Version: "1.0.0",
//			Serves:  []string{"postgresql"},
//		}, &provider{})
//	}
//
// Every call names a tenant (the deployment's namespace, the prefix of everything it owns
// on a shared server) and an instance (the name of the request within the deployment).
// Provision must be idempotent: called again with the same request it returns the same
// result and changes nothing, and it adopts objects that exist and belong to the tenant.
package resource
