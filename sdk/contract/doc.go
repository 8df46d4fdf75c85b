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
// resource.Serve validates every request against its type's schema before a provider
// sees it, so a provider can unmarshal the request into the Go type and trust its shape.
package contract
