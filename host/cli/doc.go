// Package cli is the fedhost command line: serve, plugins list|lock|check, deployments
// (a client of a running serve's API, for scripts), version. Every failure is one line on
// stderr (several for several problems) and a non-zero exit.
package cli
