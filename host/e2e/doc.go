// Package e2e tests fedhost end to end on the embedded default: the real binary, the real
// plugins, a managed PostgreSQL, a managed versitygw and Miniflux run by the local
// instance provider, driven through the HTTP API.
package e2e
