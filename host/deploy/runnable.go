package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/schema"
)

// Unrunnable says, for each app of the catalog this host's instance provider cannot run,
// why: the nodes the app renders from its defaults are refused by the provider (an OCI
// image on the local provider, say). The configure page tells the operator before a
// deploy instead of in a failed build. An app whose defaults alone do not render is not
// judged. Verdicts are kept per app version: the environment does not change while the
// host runs.
func (e *Engine) Unrunnable(ctx context.Context) map[string]string {
	out := map[string]string{}
	if e.opts.Catalog == nil {
		return out
	}
	for _, a := range e.opts.Catalog.Apps() {
		key := a.Name + "@" + a.Version
		e.runnableMu.Lock()
		why, known := e.runnable[key]
		e.runnableMu.Unlock()
		if !known {
			var ok bool
			if why, ok = e.judge(ctx, a); !ok {
				continue
			}
			e.runnableMu.Lock()
			if e.runnable == nil {
				e.runnable = map[string]string{}
			}
			e.runnable[key] = why
			e.runnableMu.Unlock()
		}
		if why != "" {
			out[a.Name] = why
		}
	}
	return out
}

// judge renders an app's nodes from its defaults and stub results and has the instance
// provider validate them; ok is false when there is no verdict (the app, its plugin or
// the provider did not answer).
func (e *Engine) judge(ctx context.Context, a *catalog.App) (why string, ok bool) {
	name := a.Name
	compiled, err := schema.Compile(name+".json", a.Schema)
	if err != nil {
		return "", false
	}
	options, err := json.Marshal(schema.ApplyDefaults(compiled, map[string]any{}))
	if err != nil {
		return "", false
	}
	c, err := a.Plugin.Client()
	if err != nil {
		return "", false
	}
	const tenant, domain = "check", "example.org"
	reqs, err := c.App().Requests(ctx, app.RequestsRequest{Tenant: tenant, Domain: domain, Config: options})
	if err != nil {
		return "", false
	}
	steps := make([]step, len(reqs))
	for i, r := range reqs {
		steps[i] = step{App: name, Name: name + "-" + r.Name, Request: r.Name, Type: r.Type, Spec: r.Spec}
	}
	nodes, err := c.App().Render(ctx, app.RenderRequest{Tenant: tenant, Domain: domain, Config: options, Results: stubResults(steps, nil)})
	if err != nil {
		return "", false
	}
	client, provider, err := e.route(contract.Instance)
	if err != nil {
		return fmt.Sprintf("this host has no instance provider to run %s on: %v", name, err), len(nodes) > 0
	}
	for _, n := range nodes {
		if err := client.Validate(ctx, contract.Instance, n.Spec); err != nil {
			return fmt.Sprintf("%s cannot run on this host: instance provider %s refuses its node %s (%s). Ask the hosting provider for an instance provider that runs it.", name, provider, n.Name, messageOf(err)), true
		}
	}
	return "", true
}

// messageOf is what a plugin's refusal says, without its code and field.
func messageOf(err error) string {
	var se *sdk.Error
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}
