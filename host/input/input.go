// Package input bounds what fedhost takes from outside, through the API, the UI and the
// CLI alike: the strings it stores and the request bodies it reads.
package input

import (
	"fmt"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
)

// Lengths, in bytes, of the strings fedhost stores.
const (
	// MaxName bounds a deployment's and a token's name.
	MaxName = 128
	// MaxSnapshot bounds a backup's id (restic's are 64 hexadecimal digits).
	MaxSnapshot = 64
)

// Request bodies, in bytes: a form or a small JSON object, and a configuration (as JSON,
// or as the configure page's form, which spells it out at greater length).
const (
	MaxBody       = 64 << 10
	MaxConfigBody = 1 << 20
)

// MaxConfiguration bounds a deployment's configuration as JSON, in bytes.
const MaxConfiguration = 256 << 10

// Error is a value fedhost does not take. It names the field and says what to send,
// never shows the value.
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string { return e.Field + ": " + e.Problem }

// Text checks s, the value of field, before fedhost stores or shows it: valid UTF-8, at
// most max bytes, and no control character or bidirectional override, which would make
// a page or a log show something else than what is stored.
func Text(field, s string, max int) error {
	switch {
	case len(s) > max:
		return &Error{Field: field, Problem: fmt.Sprintf("is longer than %d bytes: shorten it", max)}
	case !utf8.ValidString(s):
		return &Error{Field: field, Problem: "is not valid UTF-8 text: send it as UTF-8"}
	}
	for _, r := range s {
		if Unsafe(r) {
			return &Error{Field: field, Problem: "holds a control character or a bidirectional override: use printable text only"}
		}
	}
	return nil
}

// Unsafe reports whether r is a control character (C0, DEL, C1), a bidirectional
// embedding, override or isolate (U+202A-U+202E, U+2066-U+2069), or the replacement of
// invalid UTF-8.
func Unsafe(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == utf8.RuneError
}

// BodyLimit refuses a request whose body is over max bytes with 413, before the handler
// reads it. The server reads at most MaxConfigBody (its BodyLimit); a route takes less.
func BodyLimit(max int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if len(c.Request().Body()) > max {
			return fiber.ErrRequestEntityTooLarge
		}
		return c.Next()
	}
}
