// Package audit records the audit trail of the host: every side-effecting call
// and every refusal, as one event with who did what to which deployment and
// with what result.
//
// Events form a hash chain: each stores the hash of the event before it
// (prev_hash) and its own hash, sha256(prev_hash || canonical encoding of its
// fields), so Verify finds an event changed or removed after it was recorded.
// Prune removes old events and leaves a checkpoint, the hash of the last
// removed event, from which verification starts.
//
// An event never holds a secret or the client's address: Reason names where an
// error is, never the value that caused it. The client address of an anonymous
// refusal is used only in memory, to rate-limit such refusals so that a caller
// without a login cannot fill the table.
package audit
