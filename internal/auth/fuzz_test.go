package auth

import (
	"path"
	"strings"
	"testing"
)

// isToken68 reports whether s is an RFC 7235 token68: one or more of
// A-Z a-z 0-9 - . _ ~ + / and then any number of =.
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{
		"Bearer abc",
		"bearer abc",
		"Bearer  abc",
		"Bearer",
		"Bearer ",
		"Basic dXNlcjpwYXNz",
		"Bearer a.b.c",
		"Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln",
		"Bearer abc==",
		"Bearer a=b",
		"Bearer =",
		"Bearer ==",
		"Bearer a b",
		"Bearer a\tb",
		"Bearer\tabc",
		"Bearer abc ",
		"Bearer ab\x00c",
		"Bearer ab\xffc",
		"Bearer \u00e9",
		"Bearer a,b",
		"Bearer a\"b",
		"Bearer a~-._+/Z09",
		"BEARER x",
		"Bearerx",
		"",
		" ",
		" Bearer x",
		"Bearer " + strings.Repeat("a", maxTokenLen),
		"Bearer " + strings.Repeat("a", maxTokenLen+1),
		"Bearer a" + strings.Repeat("=", maxTokenLen-1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := ParseBearer([]string{header})
		if !ok {
			if tok != "" {
				t.Fatalf("refused %q but returned %q", header, tok)
			}
			return
		}
		if !isToken68(tok) {
			t.Fatalf("accepted %q: %q is not a token68", header, tok)
		}
		if len(tok) > maxTokenLen {
			t.Fatalf("accepted a token of %d bytes", len(tok))
		}
		if !strings.HasSuffix(header, tok) || !strings.EqualFold(header[:len("Bearer")], "Bearer") {
			t.Fatalf("accepted %q as %q", header, tok)
		}
		if again, ok := ParseBearer([]string{"Bearer " + tok}); !ok || again != tok {
			t.Fatalf("round trip of %q gave %q, %v", tok, again, ok)
		}
		// One header only, never two.
		if _, ok := ParseBearer([]string{header, header}); ok {
			t.Fatalf("accepted two headers %q", header)
		}
	})
}

func FuzzPermits(f *testing.F) {
	for _, s := range [][3]string{
		{"*", "", "fs__read"},
		{"*", "fs__write_*", "fs__write_file"},
		{"fs__*", "fs__write_*", "fs__read"},
		{"fs__write_file", "fs__write_*", "fs__write_file"},
		{"fs__?", "", "fs__x"},
		{"[a-c]*", "[!b]*", "b"},
		{`\*`, "", "*"},
		{"[", "", "["},
		{"*", "[", "x"},
		{"*", "\\", "\\"},
		{"a[", "", "a"},
		{"[]a]", "", "]"},
		{"[^a]", "", "b"},
		{"*", "", ""},
		{"*", "", "a/b"},
		{"**", "*?*", "x"},
		{"*", "*\xff*", "\xff"},
		{"*", "?", "\u00e9"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, allow, deny, name string) {
		p := newPolicy([]string{allow}, []string{deny}, nil)
		got := p.Permits(name)
		allowed, aerr := path.Match(allow, name)
		denied, derr := path.Match(deny, name)
		if denied && derr == nil && got {
			t.Fatalf("allow %q deny %q: %q matches the deny glob but is permitted", allow, deny, name)
		}
		if got && (!allowed || aerr != nil) {
			t.Fatalf("allow %q deny %q: %q is permitted without matching the allow glob", allow, deny, name)
		}
		if want := allowed && aerr == nil && !(denied && derr == nil); got != want {
			t.Fatalf("allow %q deny %q: Permits(%q) = %v, want %v", allow, deny, name, got, want)
		}
		// "*" allows every tool name (tool names never hold a slash) that no
		// deny glob matches.
		if !strings.Contains(name, "/") {
			star := newPolicy([]string{"*"}, []string{deny}, nil)
			if star.Permits(name) == (denied && derr == nil) {
				t.Fatalf("allow * deny %q: Permits(%q) = %v", deny, name, star.Permits(name))
			}
			// A second allow glob never takes a permission away.
			both := newPolicy([]string{allow, "*"}, []string{deny}, nil)
			if both.Permits(name) != star.Permits(name) {
				t.Fatalf("allow [%q *] deny %q: Permits(%q) = %v", allow, deny, name, both.Permits(name))
			}
		}
		// No policy of a deny "*" permits anything.
		if newPolicy([]string{allow}, []string{"*"}, nil).Permits(name) && !strings.Contains(name, "/") {
			t.Fatalf("deny * permits %q", name)
		}
	})
}
