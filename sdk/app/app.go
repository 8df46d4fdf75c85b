package app

import (
	"context"
	"encoding/json"
)

// Schema is an app's options as a JSON Schema (2020-12) with UI hints, and its icon.
type Schema struct {
	JSON          json.RawMessage
	Icon          []byte
	IconMediaType string
}

// ResourceRequest is one resource an app needs for a configuration.
type ResourceRequest struct {
	// Name is the instance name of the request within the deployment, DNS-safe.
	Name string
	// Type is the resource type (postgresql, s3, secret, ...).
	Type string
	// Spec is the request, JSON following the type's request schema.
	Spec json.RawMessage
	// DependsOn names requests whose results this one needs.
	DependsOn []string
}

// RequestsRequest gives an app the configuration it is asked about.
type RequestsRequest struct {
	// Tenant is the deployment's namespace.
	Tenant string
	// Domain is the deployment's domain, e.g. for redirect URIs and DNS records.
	Domain string
	// Config is the app's own options, valid against its schema.
	Config json.RawMessage
}

// RenderRequest gives an app its configuration and the results of its requests.
type RenderRequest struct {
	Tenant string
	Domain string
	Config json.RawMessage
	// Results maps each request's Name to its result JSON. Every SecretRef in a result
	// names a reference the instance provider can resolve (${secret:REF} in node files).
	Results map[string]json.RawMessage
}

// Node is one process or container of an app: Name (DNS-safe, unique within the app)
// and Spec, an instance request (contract.InstanceRequest as JSON).
type Node struct {
	Name string
	Spec json.RawMessage
}

// App declares one application.
type App interface {
	// Schema returns the app's options.
	Schema(ctx context.Context) (Schema, error)
	// Requests returns the resources a valid configuration needs.
	Requests(ctx context.Context, req RequestsRequest) ([]ResourceRequest, error)
	// Render returns the nodes that run the app.
	Render(ctx context.Context, req RenderRequest) ([]Node, error)
}

// Rename moves an option: a stored configuration's value at From (a JSON pointer) moves to
// To before validation, for configurations made before version Since. To may be under
// From: /smtp to /smtp/host turns a string option into an object holding it.
type Rename struct {
	From, To, Since string
}

// Renamer is an app whose options were renamed across versions.
type Renamer interface {
	Renames(ctx context.Context) ([]Rename, error)
}

// Operation is an imperative action of an app that does not change its desired state.
type Operation struct {
	Name        string
	Description string
	// Sensitive output is not kept.
	Sensitive bool
}

// Operator is an app that offers operations (backup, restore, app commands).
type Operator interface {
	Operations(ctx context.Context) ([]Operation, error)
}

// Step is the largest version step an app accepts in one update.
type Step string

// The version steps.
const (
	StepAny   Step = "any"
	StepMajor Step = "major"
	StepMinor Step = "minor"
)

// Downgrade is what an update to an older version does.
type Downgrade string

// The downgrade behaviours.
const (
	DowngradeRefuse Downgrade = "refuse"
	DowngradeWarn   Downgrade = "warn"
)

// VersionGuard limits the updates an app accepts.
type VersionGuard struct {
	// Version is the version of the app the plugin runs (not the plugin's own).
	Version     string
	MaxStep     Step
	OnDowngrade Downgrade
}

// Guarded is an app with version guards.
type Guarded interface {
	VersionGuard(ctx context.Context) (VersionGuard, error)
}

// RoleGroup is a directory group that gives app roles to its members.
type RoleGroup struct {
	Name        string
	Description string
	Roles       []string
}

// RoleGrouper is an app with role groups.
type RoleGrouper interface {
	RoleGroups(ctx context.Context) ([]RoleGroup, error)
}
