// Package sdk holds what every fedhost plugin shares, whatever its kind: the kinds, the
// protocol version, the description a plugin gives of itself, and typed errors.
//
// A plugin author imports one kind package and calls its Serve from main:
//
//   - [github.com/fedhost/fedhost/sdk/resource]: resource providers (databases, buckets,
//     secrets, DNS, TLS, directories, instances).
//   - [github.com/fedhost/fedhost/sdk/registrar]: registrar drivers (domains).
//   - [github.com/fedhost/fedhost/sdk/app]: application components (an app's option
//     schema, the resources it needs, how it runs).
//
// A host, or a test, starts plugin binaries with [github.com/fedhost/fedhost/sdk/client],
// and [github.com/fedhost/fedhost/sdk/conformance] runs the standard checks against a
// plugin binary from an author's own go test.
//
// The wire protocol (gRPC through hashicorp/go-plugin) is internal to this module: authors
// see only the Go types of these packages.
package sdk
