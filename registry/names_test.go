package registry

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // exact text; "" means valid
	}{
		{name: "simple", in: "calc"},
		{name: "all allowed characters", in: "Az09_.-"},
		{name: "namespaced", in: "github__create_issue"},
		{name: "64 characters", in: strings.Repeat("a", 64)},
		{name: "one character", in: "x"},
		{
			name:    "empty",
			in:      "",
			wantErr: "invalid tool name: the name is empty; use 1 to 64 characters from A-Z a-z 0-9 _ . -",
		},
		{
			name:    "65 characters",
			in:      strings.Repeat("a", 65),
			wantErr: `invalid tool name "` + strings.Repeat("a", 65) + `": the name is 65 characters long; at most 64 are allowed`,
		},
		{
			name:    "space",
			in:      "get weather",
			wantErr: `invalid tool name "get weather": character ' ' (U+0020) at byte 3 is not allowed; use only A-Z a-z 0-9 _ . -`,
		},
		{
			name:    "slash",
			in:      "a/b",
			wantErr: `invalid tool name "a/b": character '/' (U+002F) at byte 1 is not allowed; use only A-Z a-z 0-9 _ . -`,
		},
		{
			name:    "unicode",
			in:      "café",
			wantErr: `invalid tool name "café": character 'é' (U+00E9) at byte 3 is not allowed; use only A-Z a-z 0-9 _ . -`,
		},
		{
			name:    "invalid UTF-8",
			in:      "a\xffb",
			wantErr: `invalid tool name "a\xffb": byte 0xff (not UTF-8) at byte 1 is not allowed; use only A-Z a-z 0-9 _ . -`,
		},
		{
			name:    "hostile long name is cut",
			in:      strings.Repeat("b", 200) + " ",
			wantErr: `invalid tool name "` + strings.Repeat("b", 80) + `…": character ' ' (U+0020) at byte 200 is not allowed; use only A-Z a-z 0-9 _ . -`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName(tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateName(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateName(%q) = nil, want %q", tc.in, tc.wantErr)
			}
			if !errors.Is(err, ErrInvalidName) {
				t.Errorf("ValidateName(%q) = %v, does not match ErrInvalidName", tc.in, err)
			}
			if got := err.Error(); got != tc.wantErr {
				t.Errorf("ValidateName(%q) =\n%s\nwant\n%s", tc.in, got, tc.wantErr)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"calc", "calc"},
		{"Clock-Now", "clock_now"},
		{"clock.now", "clock_now"},
		{"github__create_issue", "github_create_issue"},
		{"a-._b", "a_b"},
		{"_x_", "_x_"},
		{"ÉA", "Éa"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := normalize(tc.in); got != tc.want {
				t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"calc", "clock_now", "clock_today", "scratchpad_read", "scratchpad_write", "weather"}
	tests := []struct {
		name string
		in   string
		n    int
		want []string
	}{
		{name: "typo", in: "clac", n: 3, want: []string{"calc"}},
		{name: "substring", in: "now", n: 3, want: []string{"clock_now"}},
		{name: "case and separators", in: "Clock.Now", n: 3, want: []string{"clock_now"}},
		{name: "closest first then alphabetical", in: "scratchpad_rite", n: 3, want: []string{"scratchpad_write", "scratchpad_read"}},
		{name: "prefix matches several", in: "clock", n: 3, want: []string{"clock_now", "clock_today"}},
		{name: "capped at n", in: "scratchpad", n: 1, want: []string{"scratchpad_read"}},
		{name: "nothing close", in: "zzzzzz", n: 3, want: nil},
		{name: "zero n", in: "calc", n: 0, want: nil},
		{name: "hostile length", in: strings.Repeat("calc", 10000), n: 3, want: []string{"calc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Suggest(tc.in, names, tc.n)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Suggest(%.20q, %d) mismatch (-want +got):\n%s", tc.in, tc.n, diff)
			}
		})
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b   string
		limit  int
		want   int
		within bool
	}{
		{"kitten", "sitting", 5, 3, true},
		{"kitten", "sitting", 2, 0, false},
		{"", "abc", 3, 3, true},
		{"abc", "abc", 0, 0, true},
		{"abcdef", "a", 2, 0, false},
	}
	var l levenshtein
	for _, tc := range tests {
		got, ok := l.within(tc.a, tc.b, tc.limit)
		if ok != tc.within || (ok && got != tc.want) {
			t.Errorf("within(%q, %q, %d) = %d, %v, want %d, %v", tc.a, tc.b, tc.limit, got, ok, tc.want, tc.within)
		}
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	got := truncate(s, 81)
	if !utf8.ValidString(got) || len(got) > 81+len("…") {
		t.Errorf("truncate(%d bytes, 81) = %q (%d bytes)", len(s), got, len(got))
	}
}
