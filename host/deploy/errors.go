package deploy

import "fmt"

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
