package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// passwordKey is the entry of Result.Secrets (and Request.Secrets) holding the user's
// password, and the name the result's password reference gives.
const passwordKey = "password"

// instance names what one tenant's instance owns on the server.
type instance struct {
	tenant, name string
}

// user is the ACL user: <tenant>-<instance>.
func (i instance) user() string { return i.tenant + "-" + i.name }

// prefix is the key and channel prefix the user is limited to. It sits within the
// tenant's own prefix <tenant>:, and ':' cannot occur in a tenant or instance name, so
// no two instances' prefixes overlap.
func (i instance) prefix() string { return i.tenant + ":" + i.name + ":" }

// marker is the key pattern of a selector that grants no command: it changes no right
// and marks the user as fedhost's for this tenant and instance. The user name alone
// cannot tell (tenant a-b, instance c and tenant a, instance b-c share one), the marker
// can.
func (i instance) marker() string { return "~fedhost:owner:" + i.tenant + ":" + i.name }

// commandRules are what an application may run: everything but administration and the
// commands that reach beyond its prefix.
//
//   - -@admin -@dangerous: ACL, CONFIG, FLUSHALL, FLUSHDB, KEYS, SORT, MIGRATE, RESTORE,
//     CLIENT LIST/KILL, MONITOR, DEBUG, SHUTDOWN, ...
//   - +info: Sidekiq and BullMQ read the server version from INFO at start. It shows
//     server-wide counters, no key names and no values.
//   - select|0 only: key patterns hold in every database, but deprovision cleans
//     database 0, so data stays there; MOVE and COPY (its DB option) would take it out.
//   - SCAN and RANDOMKEY return key names of every tenant (session ids in key names,
//     say), PUBSUB CHANNELS the channel names.
//   - FUNCTION and SCRIPT FLUSH/KILL act on server-wide libraries and scripts of others.
var commandRules = []string{
	"+@all", "-@admin", "-@dangerous", "+info",
	"-select", "+select|0", "-move", "-copy",
	"-scan", "-randomkey", "-pubsub|channels", "-pubsub|shardchannels",
	"-function", "-script|flush", "-script|kill",
}

// rules is the whole ACL of the user, from reset on, so that ACL SETUSER converges to
// exactly it whatever the user had. passwordHash is the hex SHA-256 Redis keeps: the
// password itself never travels in the command.
func (i instance) rules(passwordHash string) []string {
	r := []string{"reset", "on", "#" + passwordHash, "~" + i.prefix() + "*", "&" + i.prefix() + "*"}
	r = append(r, commandRules...)
	return append(r, "("+i.marker()+" -@all)")
}

// passwordOf returns the password the host gave back, or a new one: 32 random bytes, hex.
func passwordOf(secrets map[string][]byte) (string, error) {
	if given := secrets[passwordKey]; len(given) > 0 {
		return string(given), nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// passwordHash is the form in which Redis stores a password (ACL SETUSER #<hash>).
func passwordHash(password string) string {
	h := sha256.Sum256([]byte(password))
	return hex.EncodeToString(h[:])
}
