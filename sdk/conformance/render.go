package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/client"
)

// RenderNodes starts the app plugin at path and renders each case as App does (the
// schema's defaults filled in, results made up from the contract's result shapes), with
// App's checks of each case, and returns the nodes of every case by case name. An
// instance driver's tests give them to its Validate, to show that it runs the apps
// declared for it.
func RenderNodes(t testing.TB, path string, cases ...AppCase) map[string][]app.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := client.Start(ctx, path, client.WithEnv(sdk.DataDirEnv+"="+t.TempDir()))
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	defer p.Kill()
	a := p.App()
	if a == nil {
		t.Fatalf("%s is a %s plugin, not an app", path, p.Description().Kind)
	}
	if err := p.Configure(ctx, nil); err != nil {
		t.Fatalf("configure with empty settings: %v", err)
	}
	sc, err := a.Schema(ctx)
	if err != nil {
		t.Fatalf("Schema: %v", err)
	}
	k := &appKit{t: t, ctx: ctx, app: a}
	if !k.checkSchema(sc.JSON) {
		t.FailNow()
	}
	out := map[string][]app.Node{}
	for _, c := range cases {
		out[c.Name] = k.checkCase(c)
	}
	return out
}
