package appkit

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/fedhost/fedhost/sdk/app"
)

// Base is what the apps share beside Requests and Render: the schema, the image settings,
// the version guard, the role groups and the backup and restore operations.
type Base struct {
	Options *Options
	Guard   app.VersionGuard
	Groups  []app.RoleGroup

	pinned Images
	mu     sync.RWMutex
	images Images
}

// NewBase returns a Base running the pinned images until settings say otherwise.
func NewBase(options *Options, pinned Images, guard app.VersionGuard, groups []app.RoleGroup) *Base {
	return &Base{Options: options, Guard: guard, Groups: groups, pinned: pinned, images: pinned}
}

// SettingsSchema is the JSON Schema of the plugin's settings.
func (b *Base) SettingsSchema() json.RawMessage { return b.pinned.SettingsSchema() }

// Configure takes the plugin's settings (image overrides).
func (b *Base) Configure(_ context.Context, settings json.RawMessage) error {
	im, err := b.pinned.Configure(settings)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.images = im
	b.mu.Unlock()
	return nil
}

// Image returns the image of a node role.
func (b *Base) Image(role string) string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.images[role]
}

// Schema returns the app's options.
func (b *Base) Schema(context.Context) (app.Schema, error) {
	return app.Schema{JSON: b.Options.JSON()}, nil
}

// VersionGuard returns the app's version guard.
func (b *Base) VersionGuard(context.Context) (app.VersionGuard, error) { return b.Guard, nil }

// RoleGroups returns the directory groups that give app roles.
func (b *Base) RoleGroups(context.Context) ([]app.RoleGroup, error) { return b.Groups, nil }

// Operations are backup and restore of the app's database and buckets.
func (b *Base) Operations(context.Context) ([]app.Operation, error) {
	return []app.Operation{
		{Name: "backup", Description: "Snapshot the database and the media buckets to the deployment's backup storage."},
		{Name: "restore", Description: "Stop the app, restore the database and the media buckets from a backup, and start it again."},
	}, nil
}

// GroupNames returns the names of the role groups, for the directory request.
func (b *Base) GroupNames() []string {
	out := make([]string, len(b.Groups))
	for i, g := range b.Groups {
		out[i] = g.Name
	}
	return out
}

// Host returns the app's host name in the deployment's domain.
func Host(label, domain string) string { return label + "." + strings.TrimSuffix(domain, ".") }
