package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"hello", 0, ""},
		{"hello", -1, ""},
		{"", 3, ""},
		{"héllo", 2, "h"}, // é is 2 bytes, at 1-2: not split
		{"héllo", 3, "hé"},
		{"a😀b", 4, "a"}, // the emoji is 4 bytes, at 1-4
		{"a😀b", 5, "a😀"},
		{"😀", 3, ""},
	} {
		if got := Prefix(tc.s, tc.n); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// FuzzPrefix: the cut is a prefix, valid UTF-8 when s is, within n bytes,
// and the longest such.
func FuzzPrefix(f *testing.F) {
	f.Add("héllo wörld", 4)
	f.Add("a😀b", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Prefix(s, n)
		if !strings.HasPrefix(s, got) {
			t.Fatalf("Prefix(%q, %d) = %q, not a prefix", s, n, got)
		}
		if len(s) <= n {
			if got != s {
				t.Fatalf("Prefix(%q, %d) = %q, want s whole", s, n, got)
			}
			return
		}
		if len(got) > max(n, 0) {
			t.Fatalf("Prefix(%q, %d) = %q, over n bytes", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Prefix(%q, %d) = %q, a character split", s, n, got)
		}
		if n > 0 && len(got) < n && utf8.RuneStart(s[n]) {
			t.Fatalf("Prefix(%q, %d) = %q, shorter than it needs to be", s, n, got)
		}
	})
}
