package registry

import (
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/keypath"
)

// FieldError is a problem with one field of a tool source's definition (a
// REST spec, an upstream, an include/exclude filter), found by the package
// that owns the rule. The composition root ([gateway]) maps Field onto the
// configuration file, so that the problem can be shown at its file:line:col.
//
// Msg never contains the field's value, nor any part of it: a value may have
// come from the environment and be a secret. Value holds it for callers
// that may show it.
type FieldError struct {
	// Field is the field's path within the definition, in the key syntax of
	// toolgate's configuration file: "url", "allowed_hosts[1]",
	// "headers.X-Key", `headers."Bad Header"` (see [FieldPath]).
	Field string
	// Key reports that the problem is with the map key Field ends in (a
	// header name), not with its value.
	Key bool
	// Value is the offending value, to be shown (shortened and quoted) after
	// Msg; empty when there is none or it must never be shown (a header
	// value, an environment variable's value).
	Value string
	// Msg says what is wrong and what to write instead, without the value:
	// "is not supported; write one of GET, HEAD, ...".
	Msg string
	// Err, when not nil, is a sentinel the error matches with [errors.Is]
	// (for example [ErrInvalidPrefix]).
	Err error
}

// maxValueShown is how many characters of a value Error shows.
const maxValueShown = 60

// Error returns "<field> <msg>; got <value>", leaving out what is empty.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Field)
	if e.Field != "" {
		b.WriteByte(' ')
	}
	b.WriteString(e.Msg)
	if e.Value != "" {
		b.WriteString("; got ")
		b.WriteString(QuoteValue(e.Value))
	}
	return b.String()
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// QuoteValue quotes a value for an error message, cut to 60 characters
// (marked with "…") so that a line stays readable.
func QuoteValue(s string) string {
	if r := []rune(s); len(r) > maxValueShown {
		return strconv.Quote(string(r[:maxValueShown])) + "…"
	}
	return strconv.Quote(s)
}

// FieldPath appends key to path as the configuration file's key paths do:
// "headers.X-Key"; a key that is not a plain word (letters, digits, _ and
// -) is quoted, `headers."Bad Header"`, so a path stays on one line.
func FieldPath(path, key string) string { return keypath.Child(path, key) }
