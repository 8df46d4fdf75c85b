// Package contract holds the resource type contracts: for each resource type the shape of
// a request (what an app asks for) and of a result (what a provider answers), as Go types
// and as JSON Schemas (2020-12, embedded in schemas/).
//
// Results never hold a secret value. Where a result needs one (a password, a key), it
// holds a [SecretRef] naming an entry of the provider's resource.Result.Secrets; the host
// keeps that value through the secret resource and hands it only to the instance that
// asked. Requests of the secret type itself get their operator-supplied values the same
// way, through resource.Request.Secrets.
//
// The host validates every request against its type's schema before it sends it (the
// client package does it for any host), so a provider can unmarshal the request into the
// Go type and trust its shape. Plugins do not link the JSON Schema library: it would
// cost each of them 10-20 ms at start.
package contract
