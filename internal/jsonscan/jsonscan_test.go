package jsonscan

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFoldEq(t *testing.T) {
	for _, tc := range []struct {
		key, word string
		want      bool
	}{
		{"method", "method", true},
		{"METHOD", "method", true},
		{"_meta", "_meta", true},
		{"_META", "_meta", true},
		{"\x7fmeta", "_meta", false}, // '_' | 0x20
		{"@id", "`id", false},        // '@' | 0x20 is '`'
		{"id", "ids", false},
	} {
		if got := FoldEq([]byte(tc.key), tc.word); got != tc.want {
			t.Errorf("FoldEq(%q, %q) = %v, want %v", tc.key, tc.word, got, tc.want)
		}
	}
}

// A value nested past MaxDepth is refused, within MaxDepth read; a body
// of nothing but brackets is refused without recursing through it.
func TestMaxDepth(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	if s := New(nest(MaxDepth)); !s.Value() || !s.Done() {
		t.Errorf("%d levels refused", MaxDepth)
	}
	if s := New(nest(MaxDepth + 1)); s.Value() {
		t.Errorf("%d levels read", MaxDepth+1)
	}
	if s := New(nest(3)); !s.Value() || s.depth != 0 {
		t.Errorf("depth %d after reading, want 0", s.depth)
	}
}

// A 4 MiB body of open brackets (what a client may POST) is refused
// within a small stack: unbounded, the scan recursed once per bracket and
// grew the goroutine's stack past 512 MB.
func TestDeepBodyBoundedStack(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	deep := []byte(`{"params":{"arguments":` + strings.Repeat("[", 4<<20))
	s := New(deep)
	if s.Object(func([]byte) bool { return s.Value() }) {
		t.Error("4 Mi open brackets read")
	}
}

// Raw returns each member's value as it stands, white space around it
// left out, and refuses a value cut short.
func TestRaw(t *testing.T) {
	msg := []byte(`{"a": {"b":[1, "x\"y"]} , "c":null,"d" :"e"}`)
	s := New(msg)
	var got []string
	if !s.Object(func([]byte) bool {
		v, ok := s.Raw()
		got = append(got, string(v))
		return ok
	}) {
		t.Fatalf("%s not read", msg)
	}
	if want := []string{`{"b":[1, "x\"y"]}`, `null`, `"e"`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("values %q, want %q", got, want)
	}
	if v, ok := New([]byte(` [1, 2`)).Raw(); ok {
		t.Errorf("a value cut short read as %q", v)
	}
}
