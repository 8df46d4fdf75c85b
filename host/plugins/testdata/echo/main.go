// Command echo is a resource provider for the plugin manager's tests: Provision returns
// the request's spec, and Configure logs through hclog so the test sees the re-emission.
package main

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

var version = "1.0.0"

type echo struct{}

func (echo) Configure(_ context.Context, settings json.RawMessage) error {
	hclog.Default().Info("configured by the host", "settings_bytes", len(settings))
	return nil
}

func (echo) Provision(_ context.Context, req resource.Request) (resource.Result, error) {
	return resource.Result{Data: req.Spec}, nil
}

func (echo) Deprovision(context.Context, resource.DeprovisionRequest) error { return nil }

func main() {
	resource.Serve(sdk.Description{
		Name:           "echo",
		Version:        version,
		Summary:        "Echoes requests, for tests",
		Serves:         []string{"echo"},
		SettingsSchema: json.RawMessage(`{"type":"object","properties":{"greeting":{"type":"string"}},"additionalProperties":false}`),
	}, echo{})
}
