// Command echo is a resource provider for the plugin manager's tests: Provision returns
// the request's spec, Configure logs through hclog so the test sees the re-emission, and
// a graceful stop writes the time into the plugin's data dir, for the stop order.
package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// Set with -ldflags -X: the plugin's version, name and the one type it serves.
var (
	version = "1.0.0"
	name    = "echo"
	serves  = "echo"
)

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
		Name:           name,
		Version:        version,
		Summary:        "Echoes requests, for tests",
		Serves:         []string{serves},
		SettingsSchema: json.RawMessage(`{"type":"object","properties":{"greeting":{"type":"string"}},"additionalProperties":false}`),
	}, echo{})
	if dir := sdk.DataDir(); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "stopped"), []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o600)
	}
}
