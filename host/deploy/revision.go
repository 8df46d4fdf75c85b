package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/scheduler"
	"github.com/fedhost/fedhost/sdk"
)

// RecordRevision records the catalog revision of the apps installed now; call it at start.
func (e *Engine) RecordRevision(ctx context.Context) (string, error) {
	id, apps := e.opts.Catalog.Revision()
	raw, err := json.Marshal(apps)
	if err != nil {
		return "", err
	}
	return id, e.opts.Store.EnsureRevision(ctx, store.CatalogRevision{ID: id, Apps: string(raw)})
}

// revisionOf returns a revision's id and app versions; "" is the current revision.
func (e *Engine) revisionOf(ctx context.Context, id string) (string, map[string]string, error) {
	current, apps := e.opts.Catalog.Revision()
	if id == "" || id == current {
		return current, apps, nil
	}
	r, err := e.opts.Store.Revision(ctx, id)
	if err != nil {
		return "", nil, err
	}
	versions := map[string]string{}
	if err := json.Unmarshal([]byte(r.Apps), &versions); err != nil {
		return "", nil, fmt.Errorf("catalog revision %s: %w", id, err)
	}
	return id, versions, nil
}

// appAt returns the version of an app a revision names, or the newest for an app the
// revision does not know (enabled since).
func (e *Engine) appAt(name string, versions map[string]string) (*catalog.App, error) {
	if v, ok := versions[name]; ok {
		a, ok := e.opts.Catalog.AppAt(name, v)
		if !ok {
			return nil, fmt.Errorf("app %s %s, which this deployment's catalog revision pins, is not installed: install fedhost-app-%s_%s, or apply updates", name, v, name, v)
		}
		return a, nil
	}
	a, ok := e.opts.Catalog.App(name)
	if !ok {
		return nil, fmt.Errorf("app %q is not in the catalog of this host", name)
	}
	return a, nil
}

// versionChange is an enabled app that a build moves to another version.
type versionChange struct {
	App, From, To string
}

// checkGuards refuses, before anything changes, an update of an enabled app that its new
// version's guard does not accept (a step too large, a downgrade). It returns the apps
// whose version changes, by name.
func (e *Engine) checkGuards(ctx context.Context, d store.Deployment, cfg catalog.Config, to map[string]string) ([]versionChange, error) {
	if d.CatalogRevision == "" {
		return nil, nil
	}
	_, from, err := e.revisionOf(ctx, d.CatalogRevision)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cfg.Apps))
	for name := range cfg.Apps {
		names = append(names, name)
	}
	sort.Strings(names)
	var changes []versionChange
	for _, name := range names {
		a := cfg.Apps[name]
		if !a.Enable || from[name] == "" || to[name] == "" || from[name] == to[name] {
			continue
		}
		app, err := e.appAt(name, to)
		if err != nil {
			return nil, err
		}
		c, err := app.Plugin.Client()
		if err != nil {
			return nil, err
		}
		guard, err := c.App().VersionGuard(ctx)
		if sdk.CodeOf(err) == sdk.CodeUnsupported {
			changes = append(changes, versionChange{App: name, From: from[name], To: to[name]})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("app %s: version guard: %w", name, err)
		}
		// The guard speaks of the app's versions, which a plugin's own version may not be.
		fromVersion := from[name]
		if old, err := e.appAt(name, from); err == nil {
			if oc, err := old.Plugin.Client(); err == nil {
				if og, err := oc.App().VersionGuard(ctx); err == nil {
					fromVersion = og.Version
				}
			}
		}
		verdict, err := scheduler.CheckStep(guard, fromVersion, guard.Version)
		if err != nil {
			return nil, fmt.Errorf("app %s: %w", name, err)
		}
		if verdict.Warning != "" {
			e.log.Warn("update with a warning", "app", name, "warning", verdict.Warning)
		}
		changes = append(changes, versionChange{App: name, From: fromVersion, To: guard.Version})
	}
	return changes, nil
}
