package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

type fakeNetErr struct{ timeout bool }

func (e fakeNetErr) Error() string   { return "net failure" }
func (e fakeNetErr) Timeout() bool   { return e.timeout }
func (e fakeNetErr) Temporary() bool { return false }

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ""},
		{"classified", Errorf(NotFound, "no note %q", "k"), NotFound},
		{"wrapped classified", fmt.Errorf("calling: %w", Errorf(RateLimited, "slow down")), RateLimited},
		{"classified beats its cause", Wrap(Execution, "op", context.Canceled), Execution},
		{"canceled", context.Canceled, Cancelled},
		{"wrapped canceled", fmt.Errorf("x: %w", context.Canceled), Cancelled},
		{"deadline", context.DeadlineExceeded, Timeout},
		{"net timeout", fakeNetErr{timeout: true}, Timeout},
		{"net error", fakeNetErr{}, Network},
		{"dial error", &net.OpError{Op: "dial", Err: os.ErrNotExist}, Network},
		{"unknown", errors.New("boom"), Internal},
		{"invalid class", &Error{Class: "bogus", Msg: "x"}, Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	cause := errors.New("connection refused")
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"message", Errorf(Validation, "bad %s", "input"), "bad input"},
		{"op and cause", Wrap(Network, "calling upstream", cause), "calling upstream: connection refused"},
		{"class only", &Error{Class: Timeout}, "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	if err := Errorf(Network, "dialing: %w", cause); !errors.Is(err, cause) {
		t.Error("Errorf with %w does not unwrap to its cause")
	}
	if Wrap(Internal, "x", nil) != nil {
		t.Error("Wrap(nil) != nil")
	}
}

func TestClassProperties(t *testing.T) {
	transient := map[Class]bool{Timeout: true, Network: true, Unavailable: true, RateLimited: true}
	for _, c := range Classes {
		if !c.Valid() {
			t.Errorf("%q.Valid() = false", c)
		}
		if c.Transient() != transient[c] {
			t.Errorf("%q.Transient() = %v", c, c.Transient())
		}
	}
	if Class("nope").Valid() {
		t.Error(`Class("nope").Valid() = true`)
	}
	err := fmt.Errorf("w: %w", &Error{Class: RateLimited, RetryAfter: 3 * time.Second})
	if got := RetryAfterOf(err); got != 3*time.Second {
		t.Errorf("RetryAfterOf = %v, want 3s", got)
	}
}

func TestPermanent(t *testing.T) {
	cause := &Error{Class: Unavailable, Msg: "501 Not Implemented", Status: 501}
	got := Permanent(cause)
	if got.Error() != cause.Error() || Classify(got) != Unavailable || !errors.Is(got, cause) || !errors.Is(got, ErrPermanent) {
		t.Errorf("Permanent(%v) = %q (class %q), want the same message and class, wrapping the cause and ErrPermanent", cause, got, Classify(got))
	}
	if errors.Is(cause, ErrPermanent) {
		t.Error("an unmarked error is ErrPermanent")
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
}
