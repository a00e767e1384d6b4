package openapi

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		glob, s string
		want    bool
	}{
		{"GET /repos/*", "GET /repos/{owner}/{repo}", true}, // * crosses /
		{"GET /repos/*", "POST /repos/{owner}", false},
		{"*__list*", "gh__listRepos", true},
		{"tag:issues", "tag:issues", true},
		{"tag:issue", "tag:issues", false},
		{"get?et", "getPet", true},
		{"[dD]elete*", "deletePet", true},
		{"[!d]*", "deletePet", false},
		{"[a-c]x", "bx", true},
		{`\*lit`, "*lit", true},
		{`\*lit`, "xlit", false},
		{"a*b*c", "aXXbYYbZc", true},
		{"a*b*c", "aXXbYYbZ", false},
		{"*", "", true},
		{"é*", "été", true},
	}
	for _, tc := range tests {
		g, err := parseGlob(tc.glob)
		if err != nil {
			t.Fatalf("parseGlob(%q) = %v", tc.glob, err)
		}
		if got := g.match(tc.s); got != tc.want {
			t.Errorf("glob %q match %q = %v, want %v", tc.glob, tc.s, got, tc.want)
		}
	}
	for _, bad := range []string{"", "[a-", `x\`, "[z-a]"} {
		if _, err := parseGlob(bad); err == nil {
			t.Errorf("parseGlob(%q) = nil error, want one", bad)
		}
	}
}

// globRegexp translates a glob to an equivalent regular expression: the
// reference FuzzGlobMatch checks match against.
func globRegexp(g glob) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^`)
	for _, p := range g.parts {
		switch p.kind {
		case globLit:
			b.WriteString(regexp.QuoteMeta(p.lit))
		case globStar:
			b.WriteString(`(?s:.*)`)
		case globAny:
			b.WriteString(`(?s:.)`)
		case globClass:
			b.WriteString("[")
			if p.neg {
				b.WriteString("^")
			}
			for _, r := range p.ranges {
				fmt.Fprintf(&b, `\x{%x}`, r.lo)
				if r.hi != r.lo {
					fmt.Fprintf(&b, `-\x{%x}`, r.hi)
				}
			}
			b.WriteString("]")
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// FuzzGlobMatch checks that no glob or text makes parseGlob or match
// panic, and that match agrees with the glob's regular expression.
func FuzzGlobMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"GET /repos/*", "GET /repos/{owner}/{repo}"}, {"a*b*c", "aXbXc"}, {"[!a-c]?", "dx"},
		{`\[x]`, "[x]"}, {"tag:*", "tag:issues"}, {"**", "x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		g, err := parseGlob(pattern)
		if err != nil {
			return
		}
		got := g.match(s)
		if !utf8.ValidString(s) {
			return // the regexp reads invalid bytes differently
		}
		if want := globRegexp(g).MatchString(s); got != want {
			t.Errorf("glob %q match %q = %v, regexp says %v", pattern, s, got, want)
		}
	})
}
