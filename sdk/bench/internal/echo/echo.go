// Package echo is the resource provider the benchmarks call: Provision hands the request's
// Spec back as the result, so a call measures the plugin machinery and nothing else.
package echo

import (
	"context"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// Description is what the echo plugin says of itself.
var Description = sdk.Description{
	Name:    "echo",
	Version: "1.0.0",
	Summary: "Benchmark provider: Provision returns the request's spec.",
	Serves:  []string{"echo"},
}

// Provider echoes the spec.
type Provider struct{}

// Provision returns req.Spec as the result.
func (Provider) Provision(_ context.Context, req resource.Request) (resource.Result, error) {
	return resource.Result{Data: req.Spec}, nil
}

// Deprovision does nothing.
func (Provider) Deprovision(context.Context, resource.DeprovisionRequest) error { return nil }

var _ resource.Provider = Provider{}
