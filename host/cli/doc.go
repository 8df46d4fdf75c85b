// Package cli is the fedhost command line: serve, plugins list|lock|check, version. Every
// failure is one line on stderr (several for several problems) and a non-zero exit.
package cli
