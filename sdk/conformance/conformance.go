package conformance

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
)

// Plugin runs the checks every kind shares against the plugin binary at path: handshake
// and start, Describe fields, a clear refusal of a protocol version the plugin does not
// know, health, a valid settings schema, and a clean stop. It returns the description.
func Plugin(t *testing.T, path string) sdk.Description {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	binary, ok := client.ParseBinaryName(path)
	if !ok {
		t.Fatalf("%s: a plugin binary is named fedhost-<kind>-<name>[_<version>] with kind resource, registrar or app", path)
	}
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	p, err := client.Start(ctx, path, client.WithLogger(logger))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(p.Kill)
	desc := p.Description()

	t.Run("describe", func(t *testing.T) {
		if err := desc.Validate(); err != nil {
			t.Errorf("description: %v", err)
		}
		if desc.Kind != binary.Kind {
			t.Errorf("kind %q, but the binary is named for %q", desc.Kind, binary.Kind)
		}
		if desc.Protocol != sdk.ProtocolVersion {
			t.Errorf("protocol %d, want %d", desc.Protocol, sdk.ProtocolVersion)
		}
		if strings.TrimSpace(desc.Summary) == "" {
			t.Errorf("summary is empty: give operators one line on what the plugin does")
		}
	})

	t.Run("health", func(t *testing.T) {
		if err := p.Ping(); err != nil {
			t.Errorf("ping: %v", err)
		}
	})

	t.Run("settings_schema", func(t *testing.T) {
		if len(desc.SettingsSchema) == 0 {
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(desc.SettingsSchema))
		if err != nil {
			t.Fatalf("settings schema is not JSON: %v", err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("settings.json", doc); err != nil {
			t.Fatalf("settings schema: %v", err)
		}
		if _, err := c.Compile("settings.json"); err != nil {
			t.Errorf("settings schema is not a valid JSON Schema: %v", err)
		}
		if err := p.Configure(ctx, []byte("not json")); sdk.CodeOf(err) != sdk.CodeInvalid {
			t.Errorf("configure with settings that are not JSON: got %v, want an %s error", err, sdk.CodeInvalid)
		}
	})

	t.Run("unknown_protocol_refused", func(t *testing.T) {
		const unknown = 999
		other, err := client.Start(ctx, path, client.WithProtocols(unknown), client.WithStartTimeout(20*time.Second))
		if err == nil {
			other.Kill()
			t.Fatalf("a host that offers only protocol %d was not refused", unknown)
		}
		if !strings.Contains(err.Error(), strconv.Itoa(unknown)) {
			t.Errorf("refusal does not name the protocol version offered (%d): %v", unknown, err)
		}
	})

	t.Run("stop", func(t *testing.T) {
		p.Kill()
		if !p.Exited() {
			t.Errorf("the plugin process is still running after Kill")
		}
	})
	return desc
}
