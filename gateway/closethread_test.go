package gateway

import (
	"strings"
	"testing"
)

// TestCloseThread: closing a thread closes its stateful instances at once
// and the thread's next call starts a fresh one; other threads keep theirs.
func TestCloseThread(t *testing.T) {
	g, fc := newGateway(t, nil)
	call := func(thread, want string) {
		t.Helper()
		res, err := g.Call(t.Context(), "counter", nil, map[string]any{ThreadMetaKey: thread})
		if err != nil || res.IsError {
			t.Fatalf("counter in %s: %v %+v", thread, err, res)
		}
		if got := resultText(t, res); !strings.Contains(got, want) {
			t.Errorf("counter in %s = %s, want %s", thread, got, want)
		}
	}
	call("a", `"n":1`)
	call("a", `"n":2`)
	call("b", `"n":1`)
	closedBefore := fc.closed.Load()
	g.CloseThread(t.Context(), "a")
	if got := fc.closed.Load() - closedBefore; got != 1 {
		t.Errorf("%d instances closed after CloseThread, want 1 (thread a's, before it returns)", got)
	}
	call("a", `"n":1`) // a fresh instance
	call("b", `"n":2`) // b's instance is untouched
	g.CloseThread(t.Context(), "never-used")
	if got := fc.created.Load(); got != 3 {
		t.Errorf("%d instances created, want 3", got)
	}
}
