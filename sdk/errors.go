package sdk

import (
	"errors"
	"fmt"
)

// Code classifies an error so that the host can decide what to do and what to tell an
// operator, whatever plugin it came from.
type Code string

// The error codes a plugin returns. Any other error reaches the host as CodeInternal.
const (
	// CodeInvalid: the request or settings are wrong; Field names the culprit.
	CodeInvalid Code = "invalid_request"
	// CodeUnavailable: a server the plugin needs cannot be reached; retrying may help.
	CodeUnavailable Code = "unavailable"
	// CodeLimitExceeded: the request is over a limit of the hosting provider's environment.
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeConflict: the object exists and belongs to someone else (another tenant).
	CodeConflict Code = "conflict"
	// CodeNotFound: the object asked for does not exist.
	CodeNotFound Code = "not_found"
	// CodeUnsupported: the plugin does not offer this call (an optional ability).
	CodeUnsupported Code = "unsupported"
	// CodeInternal: anything else.
	CodeInternal Code = "internal"
)

// Error is an error with a code and, for invalid requests, the field it concerns (a JSON
// pointer or a settings key). Its message must never contain a secret value.
type Error struct {
	Code    Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, &Error{Code: c}) match any Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Field == "" || t.Field == e.Field) && t.Message == ""
}

// Errorf returns an Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns a CodeInvalid error for field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Unavailable returns a CodeUnavailable error: a server cannot be reached.
func Unavailable(format string, args ...any) *Error {
	return Errorf(CodeUnavailable, format, args...)
}

// LimitExceeded returns a CodeLimitExceeded error.
func LimitExceeded(format string, args ...any) *Error {
	return Errorf(CodeLimitExceeded, format, args...)
}

// Conflict returns a CodeConflict error.
func Conflict(format string, args ...any) *Error {
	return Errorf(CodeConflict, format, args...)
}

// NotFound returns a CodeNotFound error.
func NotFound(format string, args ...any) *Error {
	return Errorf(CodeNotFound, format, args...)
}

// CodeOf returns the code of err: the code of the first *Error in its chain, CodeInternal
// for any other non-nil error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// FieldOf returns the field of the first *Error in err's chain, or "".
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
