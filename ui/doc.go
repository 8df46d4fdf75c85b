// Package ui is the operators' web interface: server-rendered pages at / beside the JSON
// API at /api/v1, on the same engine, store, accounts and audit trail.
//
// A page needs a browser session (the fedhost_session cookie of host/auth); every form
// that changes something carries the session's CSRF token in the hidden field csrf. An
// operator sees and changes only its own deployments; a superuser sees every deployment
// and the /admin pages. Side effects and refusals go to the audit trail with the user as
// actor and "session" as issuer.
//
// The pages work without JavaScript except two small scripts: the configuration form's
// (ui/form.Script) and the live progress of a build, which follows the API's event
// stream.
package ui
