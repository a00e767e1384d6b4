// Package httpheader holds the rule for the HTTP headers a configuration
// sends with every request (a REST tool's headers, an OpenAPI source's, an
// HTTP upstream's): which names and values are allowed, and the words
// each problem is reported in. executors/rest and executors/mcpup share
// it, so the rule and its messages live in one place.
//
// It imports no toolgate package: its owners turn each [Error] into their
// own field errors.
package httpheader

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Error is one problem with configured headers. Neither Msg nor Error
// shows a header value: values are often credentials.
type Error struct {
	// Name is the header name the problem is reported at, as written.
	Name string
	// Key reports whether the problem is with the name itself; false
	// means its value.
	Key bool
	// Value is what may be shown beside the problem: the name when its
	// form is at fault, or "".
	Value string
	// Msg says what is wrong and what to write instead.
	Msg string
	// Err is a *[DuplicateError] for a name given twice; nil otherwise.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("header %q: %s", e.Name, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Check checks headers h: each name is an HTTP token (RFC 9110) that the
// HTTP client does not set itself, unique whatever its case; each value
// holds no control character but tab. It returns every problem, in the
// order of the names sorted; nil means the headers are valid.
func Check(h map[string]string) []*Error {
	var errs []*Error
	first := map[string]string{} // canonical name → the name as written
	for _, name := range slices.Sorted(maps.Keys(h)) {
		canon := http.CanonicalHeaderKey(name)
		switch other, dup := first[canon]; {
		case !validName(name):
			errs = append(errs, &Error{Name: name, Key: true, Value: name,
				Msg: "a header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~), like X-Api-Key"})
			continue
		case reserved(canon):
			errs = append(errs, &Error{Name: name, Key: true, Value: name,
				Msg: "is set by the HTTP client from the request itself; remove it"})
			continue
		case dup:
			errs = append(errs, (&DuplicateError{Name: name, Other: other}).Problem())
			continue
		}
		first[canon] = name
		switch v := h[name]; {
		case strings.ContainsAny(v, "\r\n\x00"):
			errs = append(errs, &Error{Name: name, Msg: "a header value must not contain CR, LF or NUL; put it on one line"})
		case !ValidValue(v):
			errs = append(errs, &Error{Name: name, Msg: "a header value must not contain control characters other than tab; remove them"})
		}
	}
	return errs
}

// DuplicateError is the Err of the [Error] that [Check] reports for a
// header name given twice, in different cases. [Check] reports it at
// Name, the one that sorts after Other; a caller that knows the order the
// names were written in can report it at the later one instead, with
// [DuplicateError.Swapped].
type DuplicateError struct {
	// Name is the name the error is reported at; Other is the same
	// header's other spelling.
	Name, Other string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("header %q duplicates %q", e.Name, e.Other)
}

// Problem returns the problem as reported at Name.
func (e *DuplicateError) Problem() *Error {
	return &Error{Name: e.Name, Key: true, Err: e,
		Msg: fmt.Sprintf("duplicate header, also set as %q (header names ignore case); keep one", e.Other)}
}

// Swapped returns the problem as reported at Other.
func (e *DuplicateError) Swapped() *Error {
	return (&DuplicateError{Name: e.Other, Other: e.Name}).Problem()
}

// ValidValue reports whether v has no control character but HTAB: CR or
// LF would split the header, and Go's transport refuses the rest. A REST
// tool checks its header values again once its templates are expanded.
func ValidValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validName reports whether name is an RFC 9110 token.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// reserved reports the headers net/http sets from the request itself
// (canonical names): a configured value would be ignored or would break
// the framing.
func reserved(canon string) bool {
	switch canon {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive",
		"Proxy-Connection", "Te", "Trailer", "Upgrade":
		return true
	}
	return false
}

// Token68 reports whether s can be carried as a bearer token in an
// Authorization header (RFC 6750's b64token): letters, digits, - . _ ~ + /,
// then optional = padding. Config checks static tokens with it and the
// authenticator parses presented ones with it, so the two agree.
func Token68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return true
}
