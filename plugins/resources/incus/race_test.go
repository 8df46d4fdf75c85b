//go:build race

package main

// Under -race the plugin the tests start is built with it too, so that the driver's
// goroutines (the exec's websockets) are checked, not only the test server's.
func init() { buildFlags = append(buildFlags, "-race") }
