// Package api is the host's HTTP API under /api/v1 (JSON), served with Fiber. Errors are
// {"error": {"code", "message", "location"}}.
package api
