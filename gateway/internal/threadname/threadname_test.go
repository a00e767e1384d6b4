package threadname

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

func TestNamespacesApart(t *testing.T) {
	var o OneCall
	a, b := o.Next(), o.Next()
	named, err := Named(map[string]any{threadctx.MetaKey: "x"}, "")
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := Named(map[string]any{threadctx.MetaKey: "x"}, "alice")
	bob, _ := Named(map[string]any{threadctx.MetaKey: "x"}, "bob")
	seen := map[string]bool{}
	for _, id := range []string{Session("x"), named, alice, bob, a, b} {
		if seen[id] {
			t.Errorf("thread %q given twice: a session, a name, two principals' names and one-call threads must differ", id)
		}
		seen[id] = true
	}
	// A name that looks like another namespace's stays in its own.
	if forged, _ := Named(map[string]any{threadctx.MetaKey: "s:x"}, ""); forged == Session("x") {
		t.Errorf("the name %q reaches session x's thread", "s:x")
	}
	if Session("") != "" {
		t.Errorf("Session(\"\") = %q, want none", Session(""))
	}
}

func TestNamedBadInput(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{42, "must be a string naming the thread"},
		{strings.Repeat("n", MaxNameLen+1), "is 257 bytes long; use at most 256"},
	} {
		_, err := Named(map[string]any{threadctx.MetaKey: tc.v}, "")
		var ce *retry.Error
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ce) || ce.Class != retry.Validation {
			t.Errorf("Named(%.20v) = %v; want a validation error with %q", tc.v, err, tc.want)
		}
	}
	for _, v := range []any{nil, ""} {
		if id, err := Named(map[string]any{threadctx.MetaKey: v}, "a"); id != "" || err != nil {
			t.Errorf("Named(%#v) = %q, %v; want no thread", v, id, err)
		}
	}
	if id, err := Named(map[string]any{threadctx.MetaKey: strings.Repeat("n", MaxNameLen)}, ""); id == "" || err != nil {
		t.Errorf("Named(256 bytes) = %q, %v; want a thread", id, err)
	}
}

func TestSessionsCountOnce(t *testing.T) {
	var s Sessions
	if !s.Start("a") || s.Start("a") {
		t.Error("Start(a) twice: want new, then not")
	}
	if !s.End("a") || s.End("a") || s.End("b") {
		t.Error("End(a) twice, End(b): want live, then not, not")
	}
}
