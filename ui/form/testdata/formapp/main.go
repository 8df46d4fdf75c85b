// Command formapp is an app plugin for the tests of forms: its schema has every feature
// the form renderer supports, and it needs no resource and runs no node, so that a test
// can deploy any configuration of it on any host.
package main

import (
	"context"
	_ "embed"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

//go:embed schema.json
var schema []byte

type formApp struct{}

func (formApp) Schema(context.Context) (app.Schema, error) { return app.Schema{JSON: schema}, nil }

func (formApp) Requests(context.Context, app.RequestsRequest) ([]app.ResourceRequest, error) {
	return nil, nil
}

func (formApp) Render(context.Context, app.RenderRequest) ([]app.Node, error) { return nil, nil }

func main() {
	app.Serve(sdk.Description{Name: "formapp", Version: "1.0.0", Summary: "Every form feature", Serves: []string{"formapp"}}, formApp{})
}
