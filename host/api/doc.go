// Package api is the host's HTTP API under /api/v1 (JSON), served with Fiber. Errors are
// {"error": {"code", "message", "location", "details"}}; details lists every problem of a
// refused configuration.
package api
