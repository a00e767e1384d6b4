package tests

// Thread handles for the tools of an upstream with `isolation: thread`
// (docs/protocol-2026.md, "Thread handles"): a 2026-07-28 client, which
// has no session, keeps a thread's upstream process, and its state, across
// calls by passing back the handle the first result gave it; a call
// without one gets a new process.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// noteState is what notesupstream's note tool answers.
type noteState struct {
	PID   int      `json:"pid"`
	Notes []string `json:"notes"`
	Args  []string `json:"args"`
}

// callNote calls notes__note with args and returns what the upstream
// answered (the result's first text part) and the handle the result hands
// back ("" for none).
func callNote(t *testing.T, c *client.Client, args map[string]any) (noteState, string) {
	t.Helper()
	res := mustCall(t, c, "notes__note", args, "")
	if res.IsError {
		t.Fatalf("notes__note %v: %q", args, resultText(res))
	}
	var st noteState
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok || json.Unmarshal([]byte(tc.Text), &st) != nil {
		t.Fatalf("notes__note %v: first part %#v, want the upstream's JSON", args, res.Content[0])
	}
	h := handleOf(res)
	if h != "" && !strings.Contains(resultText(res), "thread handle: "+h) {
		t.Errorf("notes__note %v: handle %s in _meta but not in the text %q", args, h, resultText(res))
	}
	return st, h
}

func TestProtocol2026UpstreamThreadHandles(t *testing.T) {
	bin := buildTestdata(t, "notesupstream")
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, fmt.Sprintf("upstreams:\n  - name: notes\n    transport: stdio\n    isolation: thread\n    command: %q\n    env: %s\n", bin, m.yaml()))
	c := connect2026(t, srv, nil)
	tools := waitTools(t, c, "notes__note", "notes__own_thread")

	if p, ok := tools["notes__note"].InputSchema.Properties["thread"].(map[string]any); !ok || p["type"] != "string" || !strings.Contains(fmt.Sprint(p["description"]), "thread handle") {
		t.Errorf("notes__note's thread property = %#v, want toolgate's optional string thread handle", tools["notes__note"].InputSchema.Properties["thread"])
	}
	if p, _ := tools["notes__own_thread"].InputSchema.Properties["thread"].(map[string]any); strings.Contains(fmt.Sprint(p["description"]), "thread handle") {
		t.Errorf("notes__own_thread's own thread property became toolgate's: %#v", p)
	}

	first, h1 := callNote(t, c, map[string]any{"text": "one"})
	if h1 == "" || !slices.Equal(first.Notes, []string{"one"}) {
		t.Fatalf("first call: notes %v, handle %q; want [one] and a handle", first.Notes, h1)
	}
	again, h := callNote(t, c, map[string]any{"text": "two", "thread": h1})
	if h != "" {
		t.Errorf("a call passing a handle got another: %q", h)
	}
	if again.PID != first.PID || !slices.Equal(again.Notes, []string{"one", "two"}) {
		t.Errorf("with the handle: process %d, notes %v; want process %d, [one two]", again.PID, again.Notes, first.PID)
	}
	if !slices.Equal(again.Args, []string{"text"}) {
		t.Errorf("with the handle, the upstream got arguments %v, want [text]: toolgate's thread argument must not reach it", again.Args)
	}

	fresh, h2 := callNote(t, c, map[string]any{})
	if h2 == "" || h2 == h1 {
		t.Errorf("a call without a handle got handle %q, want a new one (the first was %q)", h2, h1)
	}
	if fresh.PID == first.PID || len(fresh.Notes) != 0 {
		t.Errorf("without a handle: process %d, notes %v; want a new process (not %d) with none", fresh.PID, fresh.Notes, first.PID)
	}
	if back, _ := callNote(t, c, map[string]any{"thread": h1}); back.PID != first.PID || !slices.Equal(back.Notes, []string{"one", "two"}) {
		t.Errorf("back to the first handle: process %d, notes %v; want process %d, [one two]", back.PID, back.Notes, first.PID)
	}
	if pids := m.pids(t); len(pids) != 2 {
		t.Errorf("%d upstream processes, want 2 (one per handle's thread)", len(pids))
	}

	res := mustCall(t, c, "notes__note", map[string]any{"thread": "th_made-up"}, "")
	if !res.IsError || !strings.Contains(resultText(res), "unknown thread handle") {
		t.Errorf("a made-up handle: %q (isError %v), want the unknown-handle error", resultText(res), res.IsError)
	}

	// A tool with a thread argument of its own gets it, and no handles.
	own := mustCall(t, c, "notes__own_thread", map[string]any{"thread": "mine"}, "")
	if own.IsError || handleOf(own) != "" || resultText(own) != `{"thread":"mine"}` {
		t.Errorf("notes__own_thread = %q (isError %v, handle %q), want its own argument back and no handle", resultText(own), own.IsError, handleOf(own))
	}
}
