package hooks

import (
	"context"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"
)

func FuzzHookMatch(f *testing.F) {
	for _, s := range [][2]string{{"fs__*", "fs__read"}, {"[a-", "a"}, {`\`, "x"}, {"*", ""}, {"a?c", "abc"}, {"[^a]*", "b/c"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, name string) {
		h, err := New(0, config.Hook{Type: config.HookRedact, Patterns: []string{"x"}, Tools: []string{glob}}, nil, &Env{})
		want, merr := path.Match(glob, name)
		if glob == "" || merr != nil {
			if err == nil {
				t.Fatalf("New(tools: [%q]) succeeded, want an error", glob)
			}
			return
		}
		if err != nil {
			t.Fatalf("New(tools: [%q]) = %v, want no error", glob, err)
		}
		if got := h.Matches(name, ""); got != want {
			t.Errorf("Matches(%q, %q) = %v, want %v (path.Match)", glob, name, got, want)
		}
	})
}

func TestPointer(t *testing.T) {
	args := map[string]any{"path": "/etc", "a/b": 1.0, "m~n": true, "files": []any{"x", "y"}, "": "empty key"}
	tests := []struct {
		pointer string
		want    any
		wantOK  bool
	}{
		{"/path", "/etc", true},
		{"/a~1b", 1.0, true},
		{"/m~0n", true, true},
		{"/files/1", "y", true},
		{"/files/01", nil, false},
		{"/files/2", nil, false},
		{"/files/-", nil, false},
		{"/", "empty key", true},
		{"/path/x", nil, false},
		{"/nope", nil, false},
	}
	for _, tc := range tests {
		tokens, err := parsePointer(tc.pointer)
		if err != nil {
			t.Fatalf("parsePointer(%q) = %v", tc.pointer, err)
		}
		got, ok := lookupPointer(args, tokens)
		if ok != tc.wantOK || !cmp.Equal(got, tc.want) {
			t.Errorf("lookupPointer(%q) = %v, %v, want %v, %v", tc.pointer, got, ok, tc.want, tc.wantOK)
		}
	}
	for _, bad := range []string{"path", "/a~", "/a~2"} {
		if _, err := parsePointer(bad); err == nil {
			t.Errorf("parsePointer(%q) succeeded, want an error", bad)
		}
	}
}

// FuzzPointer checks that a JSON pointer built from any key finds that
// key, and that no pointer makes parsing or lookup panic.
func FuzzPointer(f *testing.F) {
	for _, s := range []string{"/a", "/a~1b", "~", "/~0/~1", "/0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if tokens, err := parsePointer(s); err == nil {
			lookupPointer(map[string]any{"a": []any{map[string]any{"b": 1}}}, tokens)
		}
		p := "/" + strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
		tokens, err := parsePointer(p)
		if err != nil {
			t.Fatalf("parsePointer(%q) = %v for the escaped key %q", p, err, s)
		}
		if v, ok := lookupPointer(map[string]any{s: "here"}, tokens); !ok || v != "here" {
			t.Errorf("lookupPointer(%q) = %v, %v, want the key %q", p, v, ok, s)
		}
	})
}

// errorResult stands in for the gateway's: the class, then the message.
func errorResult(err error) *executors.Result {
	class := retry.Classify(err)
	return &executors.Result{IsError: true, Class: class,
		Content: []executors.Content{{Type: executors.TextContent, Text: string(class) + ": " + err.Error()}}}
}

func newHook(t *testing.T, index int, hc config.Hook) *Hook {
	t.Helper()
	h, err := New(index, hc, nil, &Env{ErrorResult: errorResult})
	if err != nil {
		t.Fatalf("New(%+v) = %v", hc, err)
	}
	return h
}

// The hooks that match run in the file's order: the first before
// function to answer ends the call, and each after function gets the
// result the one before it returned.
func TestMatched(t *testing.T) {
	hs := []*Hook{
		newHook(t, 0, config.Hook{Type: config.HookRedact, Tools: []string{"a*"}, Patterns: []string{"secret"}}),
		newHook(t, 1, config.Hook{Type: config.HookTruncate, MaxBytes: 12}),
		newHook(t, 2, config.Hook{Type: config.HookDenyArgs, Principals: []string{"alice"}, Rules: []config.DenyRule{{Pointer: "/q", Pattern: "^x", Reason: "no x"}}}),
	}
	if got := Match(hs, "b", "bob"); len(got) != 1 || got[0] != hs[1] {
		t.Errorf("Match(b, bob) = %v, want the truncate hook only", got)
	}
	m := Match(hs, "abc", "alice")
	if len(m) != 3 {
		t.Fatalf("Match(abc, alice) = %d hooks, want 3", len(m))
	}
	c := &Call{Args: map[string]any{"q": "xyz"}, Raw: json.RawMessage(`{"q":"xyz"}`)}
	if res := m.Before(t.Context(), c); res == nil || res.Content[0].Text != "permission: no x" {
		t.Errorf("Before(q: xyz) = %+v, want the deny_args reason", res)
	}
	c.Args = map[string]any{"q": "ok"}
	if res := m.Before(context.Background(), c); res != nil {
		t.Errorf("Before(q: ok) = %+v, want nil", res)
	}
	in := executors.Text("a secret, told")
	got := m.After(t.Context(), c, &in)
	want := []executors.Content{
		{Type: executors.TextContent, Text: "a [redacted]"},
		{Type: executors.TextContent, Text: "[truncated: the result text is 18 bytes; only the first 12 are shown]"},
	}
	if diff := cmp.Diff(want, got.Content); diff != "" {
		t.Errorf("After mismatch (-want +got):\n%s", diff)
	}
	if in.Content[0].Text != "a secret, told" {
		t.Errorf("After changed its input: %q", in.Content[0].Text)
	}
}

func TestDenyArgs(t *testing.T) {
	rules := []denyRule{{pointer: []string{"n"}, reason: "unlucky"}}
	var err error
	if rules[0].re, err = compilePattern("p", "^13$"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      map[string]any
		wantClass retry.Class
	}{
		{"a number matches as its JSON", map[string]any{"n": 13.0}, retry.Permission},
		{"a string matches as it is", map[string]any{"n": "13"}, retry.Permission},
		{"no match", map[string]any{"n": 12.0}, ""},
		{"no such argument", map[string]any{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got retry.Class
			if err := denyArgs(rules, tc.args); err != nil {
				got = retry.Classify(err)
			}
			if got != tc.wantClass {
				t.Errorf("denyArgs(%v) class = %q, want %q", tc.args, got, tc.wantClass)
			}
		})
	}
}
