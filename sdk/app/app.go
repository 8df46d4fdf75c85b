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

// DefaultOperationTimeout is the time an operation gets when it names none, in seconds.
const DefaultOperationTimeout = 300

// Operation is an imperative action of an app that does not change its desired state.
// A protocol-1 plugin may give only Name and Description: such an operation takes no
// input and the host runs it only if it is one of its own (backup, restore).
type Operation struct {
	Name  string
	Title string
	// Description says what the operation does, in a sentence.
	Description string
	// Input is a JSON Schema (2020-12, the dialect of the app's options) of the input;
	// empty when the operation takes none. writeOnly properties are secrets: the host
	// keeps no copy of them and Command must put them on the command's Stdin only.
	Input json.RawMessage
	// Sensitive output is not kept.
	Sensitive bool
	// OutputFile, if set, is the file name under which a run's stdout is offered for
	// download (an export, say); the media type follows from its extension.
	OutputFile string
	// TimeoutSeconds bounds a run; 0 is DefaultOperationTimeout.
	TimeoutSeconds int
	// Idempotent says a second run with the same input is safe (a retry after a failure).
	Idempotent bool
	// NeedsRunning says the app must be running (healthy) for the operation to run.
	NeedsRunning bool
	// Concurrent lets a run start while another run is going on the same node; without
	// it, runs on one node go one at a time.
	Concurrent bool
}

// Operator is an app that offers operations (backup, restore, app commands).
type Operator interface {
	Operations(ctx context.Context) ([]Operation, error)
}

// CommandRequest asks an app for the command that runs an operation with an input.
type CommandRequest struct {
	Operation string
	// Input is valid against the operation's Input schema.
	Input  json.RawMessage
	Tenant string
	Domain string
	Config json.RawMessage
	// Results are those Render was given, for commands that need an address or a name.
	Results map[string]json.RawMessage
}

// Command is what runs an operation: Args of a binary in one of the app's nodes, run by
// its instance provider in the node's working dir with its environment and files, so
// that the secrets the node holds never pass through the host. Args and Env may hold the
// node spec's placeholders (${host}, ${port:NAME}, ${url:NAME}, ${file:NAME}).
type Command struct {
	// Node names one of the nodes Render returned.
	Node string
	// Binary is an artifact to run; empty runs the node's own binary.
	Binary string
	Args   []string
	// Env is added to the node's environment; no secret goes here.
	Env map[string]string
	// Stdin is written to the command's standard input: the only place for secrets.
	Stdin []byte
	// TTY runs the command on a terminal with echo off, for programs that read a
	// password only from one.
	TTY bool
}

// Commander is an Operator whose operations run as commands in its nodes.
type Commander interface {
	Command(ctx context.Context, req CommandRequest) (Command, error)
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

// OperationSyncRoles is the operation by which an app's roles follow the groups of the
// deployment's directory. Serve offers it for a RoleSyncer; the host runs it, never an
// operator: after every change of a user's groups, a disable or a delete, and on a
// timer. A failed sync is a failed run on the deployment's page and in the audit trail,
// retried at the next timer; it never fails a build.
const OperationSyncRoles = "sync-roles"

// RoleSyncInput is the input of OperationSyncRoles: by each of the app's role groups, the
// names of its members who may sign in, sorted (a disabled user is in none). A user in
// none of the lists holds none of the roles the app's groups give.
type RoleSyncInput struct {
	Members map[string][]string `json:"members"`
}

// RoleSyncer is an app whose roles follow group membership. RoleSync returns the command
// that gives each user the roles of in's groups and takes the others away; it runs like
// an operation's command, in one of the app's nodes with its environment, so the app's
// admin credentials never pass through the host. It should be idempotent: the host runs
// it again on a timer.
type RoleSyncer interface {
	RoleSync(ctx context.Context, req CommandRequest, in RoleSyncInput) (Command, error)
}

// roleSyncOperation is how Serve lists OperationSyncRoles.
func roleSyncOperation() Operation {
	return Operation{
		Name: OperationSyncRoles, Title: "Sync roles",
		Description: "Give the members of the app's role groups their roles and take them from everyone else",
		Input: json.RawMessage(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "additionalProperties": false,
  "required": ["members"],
  "properties": {"members": {"type": "object", "maxProperties": 64,
    "additionalProperties": {"type": "array", "maxItems": 10000, "items": {"type": "string", "minLength": 1, "maxLength": 64}}}}}`),
		TimeoutSeconds: 120, Idempotent: true, NeedsRunning: true, Concurrent: true,
	}
}
