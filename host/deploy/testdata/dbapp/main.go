// Command dbapp is the app plugin of the engine's import tests: one PostgreSQL database
// and no node, so that a build makes the database and restores an import into it.
package main

import (
	"context"
	"encoding/json"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

type dbapp struct{}

func (dbapp) Schema(context.Context) (app.Schema, error) {
	return app.Schema{JSON: json.RawMessage(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {}}`)}, nil
}

func (dbapp) Requests(context.Context, app.RequestsRequest) ([]app.ResourceRequest, error) {
	spec, _ := json.Marshal(contract.PostgreSQLRequest{})
	return []app.ResourceRequest{{Name: "db", Type: contract.PostgreSQL, Spec: spec}}, nil
}

func (dbapp) Render(context.Context, app.RenderRequest) ([]app.Node, error) {
	return nil, nil
}

func main() {
	app.Serve(sdk.Description{Name: "dbapp", Version: "1.0.0", Serves: []string{"dbapp"}}, dbapp{})
}
