// Package deploy is the deploy engine: it turns an operator's configuration into running
// apps. A submit applies renames, validates against the catalog's composed schema, takes
// the secrets the operator typed into the secret resource, stores the configuration and
// queues one build. The build asks each enabled app for its resource requests, routes
// each to the provider the environment names, checks everything it will ask for before
// it changes anything, provisions in dependency order, renders the apps' nodes with the
// results, applies them on the instance provider, and records the verdict of their health
// checks. Every step is idempotent: a build after a failure continues from what exists.
package deploy
