package gateway

import (
	"bytes"
	"testing"
)

// canonicalSeeds are inputs on both sides of isCanonical's subset.
var canonicalSeeds = []string{
	`{"message":"hello"}`, `{}`, `[]`, `0`, `5`, `-12`, `true`, `false`, `null`, `""`,
	`{"a":1,"b":[1,2,{"c":null}],"d":"x y"}`, `[[[]]]`, `{"":1,"a":2}`,
	`10`, `-0`, `01`, `1.5`, `1e3`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{ "a":1}`, `[1, 2]`,
	`"\u00e9"`, `"é"`, `"a\"b"`, `"<&>"`, `{"a":1}x`, `{"a":1`, `[1,]`, `tru`, `-`, ``,
}

func TestIsCanonical(t *testing.T) {
	want := map[string]bool{
		`{"message":"hello"}`: true, `{}`: true, `[]`: true, `0`: true, `5`: true, `-12`: true,
		`true`: true, `false`: true, `null`: true, `""`: true, `{"a":1,"b":[1,2,{"c":null}],"d":"x y"}`: true,
		`[[[]]]`: true, `{"":1,"a":2}`: true, `"<&>"`: true,
	}
	for _, s := range canonicalSeeds {
		if got := isCanonical([]byte(s)); got != want[s] {
			t.Errorf("isCanonical(%s) = %v, want %v", s, got, want[s])
		}
	}
}

// FuzzIsCanonical checks that isCanonical says yes only to what
// canonicalJSON leaves as it is, so argsSum hashes the same bytes either
// way.
func FuzzIsCanonical(f *testing.F) {
	for _, s := range append(canonicalSeeds, sameArgs...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !isCanonical(data) {
			return
		}
		c, err := canonicalJSON(data)
		if err != nil || !bytes.Equal(c, data) {
			t.Fatalf("isCanonical(%q) but canonicalJSON gives %q (%v)", data, c, err)
		}
	})
}

// BenchmarkArgsSum is the loop guard's hash of a typical call's arguments.
func BenchmarkArgsSum(b *testing.B) {
	c := &Call{Raw: []byte(`{"message":"hello"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := argsSum(c); err != nil {
			b.Fatal(err)
		}
	}
}
