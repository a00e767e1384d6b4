package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Class names what kind of failure an error is. The set is closed: every
// failure a tool call can have maps to exactly one of these values, and the
// value is what clients see in a result's _meta "toolgate/error_class".
type Class string

// The classes of failure. Their string values are part of toolgate's wire
// contract and its metric labels; do not rename them.
const (
	Validation  Class = "validation"   // the caller's input is wrong; fix the call
	NotFound    Class = "not_found"    // the thing asked for does not exist
	Permission  Class = "permission"   // the caller may not do this
	Timeout     Class = "timeout"      // the call ran out of time
	Network     Class = "network"      // the backend could not be reached
	Unavailable Class = "unavailable"  // the backend or a resource is temporarily unavailable
	RateLimited Class = "rate_limited" // too many calls; try later
	Execution   Class = "execution"    // the tool ran and failed
	Cancelled   Class = "cancelled"    // the caller cancelled the call
	Internal    Class = "internal"     // a bug or an unexpected failure in toolgate or a tool
	NeedsAuth   Class = "needs_auth"   // the caller must authorize the backend first (a login link); then call again
)

// Classes lists every class in a fixed order.
var Classes = []Class{Validation, NotFound, Permission, Timeout, Network, Unavailable, RateLimited, Execution, Cancelled, Internal, NeedsAuth}

// Valid reports whether c is one of the defined classes.
func (c Class) Valid() bool {
	for _, k := range Classes {
		if c == k {
			return true
		}
	}
	return false
}

// Transient reports whether a failure of class c may succeed if the same call
// is made again later: timeout, network, unavailable and rate_limited.
func (c Class) Transient() bool {
	switch c {
	case Timeout, Network, Unavailable, RateLimited:
		return true
	}
	return false
}

// Error is a classified failure. Op names the operation that failed (it may
// be empty); Msg is a human-readable message; Err is the underlying cause (it
// may be nil). RetryAfter, when positive, is how long the backend asked the
// caller to wait before trying again. Status, when not zero, is the HTTP
// status of the response the failure is.
//
// The text of an Error is shown to models and users: never put a secret in
// Msg or Op. It reaches only the caller whose call failed: a [Breaker],
// whose refusals every caller of the backend sees, names a failure by its
// Status and class, never by its text, which may hold the request's URL or
// arguments.
type Error struct {
	Class      Class
	Op         string
	Msg        string
	RetryAfter time.Duration
	Status     int
	Err        error
}

// Errorf returns an *Error of class c whose message is formatted from format
// and args. As with fmt.Errorf, a %w verb records the wrapped error.
func Errorf(c Class, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Class: c, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// Wrap returns an *Error of class c for err. op, when not empty, prefixes the
// message ("op: err"). Wrap(c, op, nil) returns nil.
func Wrap(c Class, op string, err error) *Error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Op: op, Err: err}
}

// Error returns "op: message", with empty parts left out.
func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = string(e.Class)
	}
	if e.Op == "" {
		return msg
	}
	return e.Op + ": " + msg
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Classify returns the class of err, in this order: the class of the first
// *Error in err's chain; [Cancelled] for context.Canceled; [Timeout] for
// context.DeadlineExceeded or a net.Error whose Timeout is true; [Network]
// for any other net.Error; [Internal] for everything else. Classify(nil)
// returns "".
func Classify(err error) Class {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok && e.Class.Valid() {
		return e.Class
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Cancelled
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	if ne, ok := errors.AsType[net.Error](err); ok {
		if ne.Timeout() {
			return Timeout
		}
		return Network
	}
	return Internal
}

// statusOf returns the first non-zero Status of an *Error in err's chain,
// or 0.
func statusOf(err error) int {
	for err != nil {
		e, ok := errors.AsType[*Error](err)
		if !ok {
			return 0
		}
		if e.Status != 0 {
			return e.Status
		}
		err = e.Err
	}
	return 0
}

// RetryAfterOf returns the RetryAfter of the first *Error in err's chain, or 0.
func RetryAfterOf(err error) time.Duration {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.RetryAfter
	}
	return 0
}

// ErrNotBackend marks a failure that is toolgate's own, not its backend's
// (a full thread pool, say): a breaker takes no verdict from it, as from a
// cancelled call. Mark an error with [NotBackend]; test with errors.Is.
var ErrNotBackend = errors.New("not a failure of the backend")

// NotBackend returns err marked with [ErrNotBackend], its message and chain
// otherwise unchanged. NotBackend(nil) returns nil.
func NotBackend(err error) error {
	if err == nil {
		return nil
	}
	return notBackend{err}
}

type notBackend struct{ error }

func (e notBackend) Unwrap() []error { return []error{e.error, ErrNotBackend} }

// ErrPermanent marks a failure that repeating the same call cannot fix,
// whatever its class: a certificate the backend will present again, a
// redirect the tool may not follow, an HTTP status such as 501 Not
// Implemented. [Plan.Decide] never retries it and gives no reason, as for
// a class the policy does not retry. Mark an error with [Permanent]; test
// with errors.Is.
var ErrPermanent = errors.New("retrying cannot fix this failure")

// Permanent returns err marked with [ErrPermanent], its message, class and
// chain otherwise unchanged. Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

type permanent struct{ error }

func (e permanent) Unwrap() []error { return []error{e.error, ErrPermanent} }
