// Command fedhost-resource-echo is the SDK side of the benchmarks: the echo provider
// served with resource.Serve, as any fedhost resource plugin is.
package main

import (
	"github.com/fedhost/fedhost/sdk/bench/internal/echo"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	resource.Serve(echo.Description, echo.Provider{})
}
