package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
)

// sameArgs spells one arguments object four ways: key order, spacing and
// number spelling differ.
var sameArgs = []string{
	`{"q":"x","n":1,"o":{"a":[1,2],"b":true}}`,
	`{"o":{"b":true,"a":[1.0,2e0]},"n":1.0,"q":"x"}`,
	` { "n" : 1e0 , "q" : "x" , "o" : { "a" : [ 10e-1 , 0.2e1 ] , "b" : true } } `,
	`{"n":100e-2,"o":{"a":[1,2],"b":true},"q":"x"}`,
}

func TestArgsSum(t *testing.T) {
	sum := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	canon := sum(`{"n":1,"o":{"a":[1,2],"b":true},"q":"x"}`)
	type argsCase struct {
		name    string
		raw     string
		decoded any
		want    [32]byte
	}
	tests := []argsCase{
		{"absent", ``, nil, sum(`{}`)},
		{"spaces", "  \n", nil, sum(`{}`)},
		{"null", `null`, nil, sum(`{}`)},
		{"null spaced", ` null `, nil, sum(`{}`)},
		{"empty object", `{}`, nil, sum(`{}`)},
		{"empty object spaced", ` { } `, nil, sum(`{}`)},
		{"decoded empty", ``, map[string]any{}, sum(`{}`)},
		{"decoded nil map", ``, map[string]any(nil), sum(`{}`)},
		{"raw wins over decoded", `{"a":1}`, map[string]any{"a": 2}, sum(`{"a":1}`)},
		{"null raw falls back to decoded", `null`, map[string]any{"a": 2}, sum(`{"a":2}`)},
		{"decoded", ``, map[string]any{"q": "x", "n": 1, "o": map[string]any{"b": true, "a": []any{1.0, 2}}}, canon},
		{"big integer kept", `{"n":10000000000000000000001}`, nil, sum(`{"n":10000000000000000000001}`)},
		{"html kept", `{"s":"<&>"}`, nil, sum(`{"s":"<&>"}`)},
	}
	for i, s := range sameArgs {
		tests = append(tests, argsCase{fmt.Sprint("same args ", i), s, nil, canon})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ArgsSum(json.RawMessage(tc.raw), tc.decoded)
			if err != nil || got != tc.want {
				t.Errorf("ArgsSum(%q, %v) = %x, %v; want %x", tc.raw, tc.decoded, got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{`{`, `{"a":1} {}`, `nul`, `{"a":1,}`} {
		if got, err := ArgsSum(json.RawMessage(bad), map[string]any{}); err == nil {
			t.Errorf("ArgsSum(%q) = %x, want an error", bad, got)
		}
	}
	if got, err := ArgsSum(nil, map[string]any{"f": func() {}}); err == nil {
		t.Errorf("ArgsSum(nil, a func) = %x, want an error", got)
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{"b":1,"a":[true,null,"x"]}`, `{"a":[true,null,"x"],"b":1}`},
		{` { "a" : 1.0 } `, `{"a":1}`},
		{`1e0`, `1`},
		{`10`, `1e1`},
		{`1.5`, `15e-1`},
		{`-0`, `0`},
		{`-0.0e5`, `0`},
		{`0.001`, `1e-3`},
		{`1e400`, `1e400`},
		{`-12.340E+2`, `-1234`},
		{`123456789012345678901234567890`, `12345678901234567890123456789e1`},
		{`123456789012345678901234567891`, `123456789012345678901234567891`},
		{`1e-99999999999999999999999`, `1e-99999999999999999999999`},
		{`"<&>\u00e9"`, `"<&>é"`},
		{`{"a":1,"a":2}`, `{"a":2}`},
	}
	for _, tc := range tests {
		got, err := JSON([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("JSON(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{``, `{`, `{} {}`, `1 2`, `nul`} {
		if got, err := JSON([]byte(bad)); err == nil {
			t.Errorf("JSON(%q) = %s, want an error", bad, got)
		}
	}
}

// FuzzJSON checks that JSON is idempotent, gives valid
// JSON, and gives the same form for a value re-marshalled by
// encoding/json (other spacing, key order and number spelling).
func FuzzJSON(f *testing.F) {
	for _, s := range append(sameArgs, `1e400`, `-0`, `[1,1.0,1e0]`, `{"a":{"b":[{}]}}`, `"\ud800"`, `123456789012345678901234567890`, `0.1e-7`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c1, err := JSON(data)
		if err != nil {
			return
		}
		if !json.Valid(c1) {
			t.Fatalf("JSON(%q) = %q, not valid JSON", data, c1)
		}
		c2, err := JSON(c1)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("JSON not idempotent: %q → %q → %q (%v)", data, c1, c2, err)
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return // numbers encoding/json cannot hold (1e400)
		}
		re, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		c3, err := JSON(re)
		if err != nil {
			t.Fatalf("JSON(re-marshalled %q) error %v", re, err)
		}
		if !json.Valid(data) || hasBigNumber(data) {
			return // float64 rounded a number: the value changed
		}
		if !bytes.Equal(c1, c3) {
			t.Fatalf("JSON(%q) = %q, but of its re-marshalled %q = %q", data, c1, re, c3)
		}
	})
}

// hasBigNumber reports whether data holds a number float64 cannot hold
// exactly, so that re-marshalling it changes its value.
func hasBigNumber(data []byte) bool {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if n, ok := tok.(json.Number); ok {
			f, err := n.Float64()
			if err != nil {
				return true
			}
			c1, err1 := Number(string(n))
			c2, err2 := Number(string(mustMarshal(f)))
			if err1 != nil || err2 != nil || c1 != c2 {
				return true
			}
		}
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

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

// FuzzIsCanonical checks that isCanonical says yes only to what JSON
// leaves as it is, so ArgsSum hashes the same bytes either way.
func FuzzIsCanonical(f *testing.F) {
	for _, s := range append(canonicalSeeds, sameArgs...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !isCanonical(data) {
			return
		}
		c, err := JSON(data)
		if err != nil || !bytes.Equal(c, data) {
			t.Fatalf("isCanonical(%q) but JSON gives %q (%v)", data, c, err)
		}
	})
}

// BenchmarkArgsSum is the hash of a typical call's arguments.
func BenchmarkArgsSum(b *testing.B) {
	raw := []byte(`{"message":"hello"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ArgsSum(raw, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// RawSum: arguments spelt otherwise hash alike; absent, null and {} alike;
// malformed text as it is, and two unlike texts unlike.
func TestRawSum(t *testing.T) {
	if RawSum([]byte(`{"n":1}`)) != RawSum([]byte(` { "n" : 1.0 } `)) {
		t.Error(`RawSum({"n":1}) != RawSum( { "n" : 1.0 } )`)
	}
	if RawSum(nil) != RawSum([]byte(`{}`)) || RawSum([]byte(`null`)) != RawSum([]byte(` {} `)) {
		t.Error("absent, null and {} arguments hash unlike")
	}
	bad := []byte(`{"n":1`)
	if got, want := RawSum(bad), sha256.Sum256(bad); got != want {
		t.Errorf("RawSum(%s) = %x, want the hash of the text, %x", bad, got, want)
	}
	if RawSum(bad) == RawSum([]byte(`{"n":2`)) {
		t.Error("two unlike malformed texts hash alike")
	}
}
