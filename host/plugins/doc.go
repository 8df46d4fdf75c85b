// Package plugins finds, verifies, starts and supervises the plugin binaries of a fedhost
// host: fedhost-<kind>-<name>[_<version>] files in the plugin directory, each checked
// against plugins.lock before it runs, pinged for health and restarted with a capped
// exponential backoff when it crashes.
package plugins
