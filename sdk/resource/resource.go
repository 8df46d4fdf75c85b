package resource

import (
	"context"
	"encoding/json"
	"time"
)

// Request asks a provider for one resource.
type Request struct {
	// Tenant is the deployment's namespace: DNS-safe, at most 32 characters.
	Tenant string
	// Instance names the request within the deployment, DNS-safe.
	Instance string
	// Type is the resource type, one of the provider's Serves.
	Type string
	// Spec is the request, JSON following the type's request schema.
	Spec json.RawMessage
	// Secrets holds the secret values the provider returned for this resource before, kept
	// by the host in the secret resource, so a provision again reuses them, under the keys
	// the provider gave them. Where the spec names a secret of another resource (a
	// SecretRef, such as a tls request's dns update key or a route's certificate key), the
	// host puts its value here too, under the SecretRef's name.
	Secrets map[string][]byte
}

// Result is what a provider made.
type Result struct {
	// Data is the result, JSON following the type's result schema. It holds references to
	// secrets, never secret values.
	Data json.RawMessage
	// Secrets are values the host must keep through the secret resource and give back in
	// the next Request (a generated password, say). They never enter the host's store.
	Secrets map[string][]byte
}

// DeprovisionRequest asks a provider to remove a resource.
type DeprovisionRequest struct {
	Tenant   string
	Instance string
	Type     string
	Spec     json.RawMessage
	// Retain keeps the data (a database's contents, a bucket's objects) and removes only
	// what gives access to it.
	Retain bool
}

// Status is the state of a resource as the provider sees it.
type Status struct {
	// State is one of "ready", "pending", "degraded", "missing".
	State   string
	Message string
	Data    json.RawMessage
}

// Provider answers requests for the resource types it serves.
type Provider interface {
	// Provision creates or reconciles the resource and returns its result.
	Provision(ctx context.Context, req Request) (Result, error)
	// Deprovision removes the resource; removing one that is gone is not an error.
	Deprovision(ctx context.Context, req DeprovisionRequest) error
}

// Validator checks a request without changing anything. Serve already checks the tenant,
// instance and type names.
type Validator interface {
	Validate(ctx context.Context, typ string, spec json.RawMessage) error
}

// StatusReporter reports the state of a resource.
type StatusReporter interface {
	Status(ctx context.Context, req Request) (Status, error)
}

// Revealer gives a secret's value to the instance that owns it. Secret providers
// implement it; the host calls it only to hand a value to that instance.
type Revealer interface {
	Reveal(ctx context.Context, tenant, instance, reference string) ([]byte, error)
}

// ExecRequest asks an instance provider to run a command in a node it runs.
type ExecRequest struct {
	Tenant   string
	Instance string
	Type     string
	// Spec is the node's instance request, as last provisioned.
	Spec json.RawMessage
	// Binary is an artifact to run; empty runs the node's own binary.
	Binary string
	// Args and Env may hold the node spec's placeholders (${host}, ${port:NAME},
	// ${url:NAME}, ${file:NAME}); Env is added to the node's environment.
	Args []string
	Env  map[string]string
	// Stdin is written to the command's standard input, which is then closed. Secret
	// inputs travel here only: the provider keeps, logs and echoes none of it.
	Stdin []byte
	// TTY runs the command on a terminal with echo off.
	TTY bool
	// Timeout bounds the run; when it passes, the provider kills the command's process
	// group and reports TimedOut. Zero means the call's deadline only.
	Timeout time.Duration
}

// ExecOutput is a piece of a command's output.
type ExecOutput struct {
	// Stream is "stdout" or "stderr".
	Stream string
	Data   []byte
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int
	TimedOut bool
	// Status says how it ended, in words ("exited with status 1", "killed by signal ...").
	Status string
}

// Executor runs commands in the nodes an instance provider runs. Exec returns when the
// command and every process it started are gone: cancelling ctx kills the command's
// process group and returns ctx's error.
type Executor interface {
	Exec(ctx context.Context, req ExecRequest, output func(ExecOutput) error) (ExecResult, error)
}

// ProviderFuncs builds a Provider from functions, for small providers and tests.
type ProviderFuncs struct {
	ProvisionFunc   func(context.Context, Request) (Result, error)
	DeprovisionFunc func(context.Context, DeprovisionRequest) error
}

// Provision calls ProvisionFunc.
func (f ProviderFuncs) Provision(ctx context.Context, req Request) (Result, error) {
	return f.ProvisionFunc(ctx, req)
}

// Deprovision calls DeprovisionFunc.
func (f ProviderFuncs) Deprovision(ctx context.Context, req DeprovisionRequest) error {
	return f.DeprovisionFunc(ctx, req)
}

var _ Provider = ProviderFuncs{}
