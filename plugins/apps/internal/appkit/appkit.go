// Package appkit holds what the Mastodon, PeerTube and Pixelfed app plugins share: their
// options (validated against the app's own schema, with the host's keys taken out),
// typed results, and node specs whose secrets reach the process only at start.
//
// # The configuration an app receives
//
// The host composes the deployment schema from each app's schema and adds "enable",
// "deleteData" and "domain" itself; an app gets its own options and, beside them, the
// deployment's domain. Each app serves at <app name>.<domain>. Requests and Render check
// the options against the app's schema again (the host is the authority, the plugin does
// not trust its input) and fill in defaults for options left out.
//
// # Secrets in node specs
//
// Results name secrets by reference and never hold their values. A node gets each secret
// as a file whose content is the ${secret:REF} placeholder (the host writes the revealed
// value there), and a small start script exports the file's content into the environment
// variable the app reads, then runs the app's own command. Neither the node spec nor the
// plugin ever holds a value.
package appkit
