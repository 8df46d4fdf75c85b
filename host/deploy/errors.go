package deploy

import (
	"fmt"
	"unicode/utf8"

	"github.com/fedhost/fedhost/sdk/schema"
)

// Error codes the API maps to HTTP statuses.
const (
	CodeInvalidConfiguration = "invalid_configuration"
	CodeQueueFull            = "queue_full"
	CodeConflict             = "conflict"
	CodeNotFound             = "not_found"
	// CodeUnavailable: a service fedhost needs (the backup repository) did not answer;
	// nothing changed, and the same call may work later.
	CodeUnavailable = "unavailable"
	// CodeLimitReached: the caller holds as many of a thing as the host allows.
	CodeLimitReached = "limit_reached"
)

// Error is a refusal of a call, before anything changed. Location is the JSON pointer of
// the culprit, when there is one; Message never holds a configuration value.
type Error struct {
	Code     string
	Message  string
	Location string
	// Details lists every problem of an invalid configuration, each at its pointer; the
	// first is also Location and Message.
	Details []schema.Problem
}

func (e *Error) Error() string {
	if e.Location != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Location, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func refuse(code, location, format string, args ...any) *Error {
	return &Error{Code: code, Location: location, Message: fmt.Sprintf(format, args...)}
}

// invalid refuses a configuration with its problems.
func invalid(problems []schema.Problem) *Error {
	return &Error{Code: CodeInvalidConfiguration, Location: problems[0].Location, Message: problems[0].Message, Details: problems}
}

// boundedPointer is a pointer from a request, cut so that an error never carries more
// than a bounded part of what was sent.
func boundedPointer(ptr string) string {
	const max = 256
	if len(ptr) <= max {
		return ptr
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(ptr[cut]) {
		cut--
	}
	return ptr[:cut] + "…"
}
