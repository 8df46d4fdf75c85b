// Package client starts fedhost plugin binaries the way the fedhost host does and gives
// typed clients for each kind. The host and sdk/conformance both use it.
//
//	p, err := client.Start(ctx, "bin/plugins/fedhost-resource-postgresql",
//		client.WithChecksum(sum), client.WithLogger(logger))
//	if err != nil { ... }
//	defer p.Kill()
//	res, err := p.Resource().Provision(ctx, resource.Request{...})
package client
