package cli

import (
	"testing"
	"unicode/utf8"
)

func TestFirstLine(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"two\nlines", 10, "two"},
		{"abcdefghij", 5, "abcd…"},
		{"ééééé", 5, "éé…"}, // 10 bytes: cut at 4, a character boundary
		{"aéééé", 5, "aé…"}, // cut at 4 would split the second é: back to 3
	} {
		got := FirstLine(tc.s, tc.max)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("FirstLine(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
	}
}
