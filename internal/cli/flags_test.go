package cli

import (
	"io"
	"slices"
	"strings"
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

// TestParseInterleaved checks that flags are taken wherever they stand
// and that "--" ends them.
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		config     string
		json       bool
		positional []string
	}{
		{[]string{"--config", "a.yaml", "calc", "{}"}, "a.yaml", false, []string{"calc", "{}"}},
		{[]string{"calc", "--config", "a.yaml", "{}", "--json"}, "a.yaml", true, []string{"calc", "{}"}},
		{[]string{"calc", "{}", "-config=a.yaml"}, "a.yaml", false, []string{"calc", "{}"}},
		{[]string{"calc", "--", "--json", "x"}, "", false, []string{"calc", "--json", "x"}},
		{[]string{"--json", "--", "-1"}, "", true, []string{"-1"}},
		{nil, "", false, nil},
	} {
		fs, c := NewFlags("test", io.Discard)
		asJSON := fs.Bool("json", false, "")
		if err := Parse(fs, tc.args); err != nil {
			t.Fatalf("Parse(%q): %v", tc.args, err)
		}
		if c.Config != tc.config || *asJSON != tc.json || !slices.Equal(fs.Args(), tc.positional) {
			t.Errorf("Parse(%q): config %q, json %v, args %q; want %q, %v, %q", tc.args, c.Config, *asJSON, fs.Args(), tc.config, tc.json, tc.positional)
		}
	}
}

func TestParseUnknownFlag(t *testing.T) {
	var out strings.Builder
	fs, _ := NewFlags("test", &out)
	err := Parse(fs, []string{"calc", "--nope"})
	if ec, ok := err.(ExitError); !ok || ec.Code != 2 || !strings.Contains(out.String(), "flag provided but not defined: -nope") {
		t.Errorf("Parse with an unknown flag after an argument: %v, output %q; want exit 2 naming the flag", err, out.String())
	}
}

func TestMaxArgs(t *testing.T) {
	fs, _ := NewFlags("tools", io.Discard)
	if err := Parse(fs, []string{"extra", "more"}); err != nil {
		t.Fatal(err)
	}
	err := MaxArgs(fs, 0, "")
	want := `toolgate tools takes no arguments; unexpected "extra" "more" (flags go before or after the arguments: run 'toolgate tools --help' for them)`
	if ec, ok := err.(ExitError); !ok || ec.Code != 2 || ec.Msg != want {
		t.Errorf("MaxArgs = %v, want exit 2 with %q", err, want)
	}
	if err := MaxArgs(fs, 2, "NAME [JSON]"); err != nil {
		t.Errorf("MaxArgs within the limit: %v", err)
	}
}
