package schemas

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// smallSchema is the typical tool schema the fast path is for.
const smallSchema = `{"type":"object","properties":{"text":{"type":"string","maxLength":20},"n":{"type":"integer"}},"required":["text"],"additionalProperties":false}`

// fastSeeds are schemas inside the fast subset (the first fastSubset), and
// some outside it.
var fastSeeds = []string{
	smallSchema,
	`{"type":"object","properties":{"expression":{"type":"string","minLength":1,"maxLength":4096}},"required":["expression"],"additionalProperties":false}`,
	`{"type":"object","properties":{"op":{"type":"string","enum":["put","get","list","clear"]},"key":{"type":"string","minLength":1,"maxLength":3},"value":{"type":"string","maxLength":65536}},"required":["op"],"additionalProperties":false}`,
	`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":60000},"f":{"type":"number","minimum":-0.5,"exclusiveMaximum":1e21}},"required":["ms"]}`,
	`{"type":"object","properties":{"x":{"type":["number","null"],"exclusiveMinimum":0,"exclusiveMaximum":1.5},"tags":{"type":"array","items":{"enum":["a","b",1,true,null,0.1,-2.5e-7]},"minItems":1,"maxItems":3},"o":{"type":"object","properties":{"d":{"type":"boolean"}},"required":["d"]}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"description":"any","maxLength":2,"minimum":3},"b":true,"c":{"const":9007199254740992},"d":{"type":"integer","maximum":9007199254740992}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"array","items":{"type":"integer","minimum":1e-300}}},"additionalProperties":false}}}}`,
	`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}`,                                     // outside: pattern
	`{"type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`,                 // outside: $ref
	`{"type":"object","additionalProperties":{"type":"string"}}`,                                                // outside: schema-valued
	`{"type":"object","properties":{"n":{"type":"number","minimum":0.1000000000000000000001}}}`,                 // outside: inexact number
	`{"type":"object","properties":{"n":{"enum":[9007199254740993,"x"]},"m":{"type":"number","multipleOf":2}}}`, // outside: inexact, multipleOf
}

// fastSubset is how many of fastSeeds are inside the subset.
const fastSubset = 7

func TestBuildFast(t *testing.T) {
	deep := `{"type":"string"}`
	for range maxFastDepth {
		deep = `{"properties":{"a":` + deep + `}}`
	}
	tests := []struct {
		name   string
		schema string
		want   bool
	}{
		{"empty", `{}`, true},
		{"every supported keyword", `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"t","description":"d","$comment":"c","type":"object","properties":{"s":{"type":["string","null"],"minLength":1,"maxLength":5,"format":"email","default":"x","examples":["y"],"readOnly":true,"writeOnly":false,"deprecated":true},"n":{"type":"number","minimum":0,"maximum":9,"exclusiveMinimum":-1,"exclusiveMaximum":10},"e":{"enum":["a",1,true,null]},"c":{"const":"k"},"a":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2},"t":true},"required":["s"],"additionalProperties":true}`, true},
		{"draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"n":{"exclusiveMinimum":0}}}`, true},
		{"nested to the depth limit", deep, true},
		{"nested too deep", `{"properties":{"b":` + deep + `}}`, false},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"minimum":0,"exclusiveMinimum":true}}}`, false},
		{"draft 2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema"}`, false},
		{"nested $schema", `{"properties":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`, false},
		{"false subschema", `{"properties":{"a":false}}`, false},
		{"schema additionalProperties", `{"additionalProperties":{"type":"string"}}`, false},
		{"object enum member", `{"properties":{"a":{"enum":[{"b":1}]}}}`, false},
		{"array const", `{"properties":{"a":{"const":[1]}}}`, false},
		{"empty enum", `{"properties":{"a":{"enum":[]}}}`, false},
		{"inexact bound", `{"properties":{"a":{"maximum":0.1000000000000000000001}}}`, false},
		{"inexact enum member", `{"properties":{"a":{"enum":[9007199254740993]}}}`, false},
		{"number out of float64 range", `{"properties":{"a":{"maximum":1e400}}}`, false},
		{"fractional maxLength", `{"properties":{"a":{"maxLength":2.0}}}`, false},
		{"items list", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"items":[{"type":"string"}]}}}`, false},
		{"items false", `{"properties":{"a":{"items":false}}}`, false},
		{"$ref to a property", `{"properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`, false},
	}
	for _, kw := range []string{
		`"pattern":"^a"`, `"$ref":"#/$defs/x","$defs":{"x":{}},"$id":"https://x.example/s.json"`, `"$defs":{"a":{}}`, `"definitions":{"a":{}}`, `"$id":"x.json"`, `"$anchor":"a"`,
		`"allOf":[{}]`, `"anyOf":[{}]`, `"oneOf":[{}]`, `"not":{"type":"null"}`,
		`"if":{},"then":{},"else":{}`, `"patternProperties":{"^a":{}}`, `"dependentRequired":{"a":["b"]}`,
		`"dependentSchemas":{"a":{}}`, `"unevaluatedProperties":false`, `"unevaluatedItems":false`,
		`"propertyNames":{"maxLength":3}`, `"contains":{}`, `"uniqueItems":true`, `"multipleOf":2`,
		`"minProperties":1`, `"maxProperties":1`, `"prefixItems":[{}]`, `"x-vendor":1`,
		`"contentEncoding":"base64"`,
	} {
		tests = append(tests,
			struct {
				name   string
				schema string
				want   bool
			}{"root " + kw, `{` + kw + `}`, false},
			struct {
				name   string
				schema string
				want   bool
			}{"nested " + kw, `{"properties":{"a":{"type":"array","items":{` + kw + `}}}}`, false},
		)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.schema)
			if got := s.fast != nil; got != tc.want {
				t.Errorf("Compile(%s): fast path built = %v, want %v", tc.schema, got, tc.want)
			}
		})
	}
}

func TestFastValid(t *testing.T) {
	const (
		bounds  = `{"properties":{"n":{"minimum":1,"exclusiveMaximum":2.5},"x":{"exclusiveMinimum":-1,"maximum":0}}}`
		numEnum = `{"properties":{"e":{"enum":[1,"1",0.1,null,false]},"c":{"const":-0}}}`
		nested  = `{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}}}}}`
		arrays  = `{"properties":{"a":{"type":"array","items":{"type":"integer","minimum":0},"minItems":1,"maxItems":3},"b":{"items":true}}}`
		types   = `{"properties":{"i":{"type":"integer"},"in":{"type":["integer","null"]},"b":{"type":"boolean"},"s":{"type":"string"},"a":{"type":"array"},"o":{"type":"object"},"z":{"type":"null"}}}`
	)
	tests := []struct {
		name      string
		schema    string
		in        string
		useNumber bool // decode numbers as json.Number
		want      bool
	}{
		{"maxLength counts runes", smallSchema, `{"text":"ééééééééééééééééééé"}`, false, true}, // 19 runes, 38 bytes
		{"maxLength exactly", smallSchema, `{"text":"éééééééééééééééééééé"}`, false, true},
		{"maxLength exceeded in runes", smallSchema, `{"text":"ééééééééééééééééééééé"}`, false, false},
		{"maxLength with astral runes", smallSchema, `{"text":"😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀"}`, false, true},
		{"minLength counts runes", fastSeeds[2], `{"op":"get","key":"é"}`, false, true},
		{"minLength", fastSeeds[2], `{"op":"get","key":""}`, false, false},
		{"maxLength 3 with 3 runes in 6 bytes", fastSeeds[2], `{"op":"get","key":"ééé"}`, false, true},
		{"maxLength 3 with 4 runes", fastSeeds[2], `{"op":"get","key":"éééé"}`, false, false},
		{"required present", smallSchema, `{"text":"x","n":1}`, false, true},
		{"required missing", smallSchema, `{"n":1}`, false, false},
		{"additionalProperties false with an extra key", smallSchema, `{"text":"x","extra":1}`, false, false},
		{"additionalProperties allowed", fastSeeds[3], `{"ms":1,"extra":[{}]}`, false, true},
		{"1.0 is an integer", smallSchema, `{"text":"x","n":1.0}`, false, true},
		{"1e2 is an integer", smallSchema, `{"text":"x","n":1e2}`, false, true},
		{"1.5 is not an integer", smallSchema, `{"text":"x","n":1.5}`, false, false},
		{"1.0 is an integer (json.Number)", smallSchema, `{"text":"x","n":1.0}`, true, true},
		{"12.5e1 is an integer (json.Number)", smallSchema, `{"text":"x","n":12.5e1}`, true, true},
		{"1.25e1 is not an integer (json.Number)", smallSchema, `{"text":"x","n":1.25e1}`, true, false},
		{"huge integer (json.Number)", smallSchema, `{"text":"x","n":1e400}`, true, true},
		{"tiny fraction (json.Number)", smallSchema, `{"text":"x","n":1e-400}`, true, false},
		{"wrong type", smallSchema, `{"text":5}`, false, false},
		{"minimum inclusive", bounds, `{"n":1}`, false, true},
		{"below minimum", bounds, `{"n":0.9999999999999999}`, false, false},
		{"exclusiveMaximum at the bound", bounds, `{"n":2.5}`, false, false},
		{"exclusiveMaximum below the bound", bounds, `{"n":2.4999999999999996}`, false, true},
		{"exclusiveMaximum at the bound (json.Number)", bounds, `{"n":25e-1}`, true, false},
		{"exclusiveMaximum just below (json.Number)", bounds, `{"n":2.49999999999999999999999}`, true, true},
		{"minimum just below (json.Number)", bounds, `{"n":0.99999999999999999999999}`, true, false},
		{"exclusiveMinimum at the bound", bounds, `{"x":-1}`, false, false},
		{"exclusiveMinimum above the bound", bounds, `{"x":-0.5}`, false, true},
		{"maximum 0 with -0", bounds, `{"x":-0}`, false, true},
		{"maximum 0 above", bounds, `{"x":1e-300}`, false, false},
		{"bounds ignore strings", bounds, `{"n":"7"}`, false, true},
		{"enum number 1 vs 1.0", numEnum, `{"e":1.0}`, false, true},
		{"enum number 1 vs 1.0 (json.Number)", numEnum, `{"e":1.0}`, true, true},
		{"enum number 1 vs 10e-1 (json.Number)", numEnum, `{"e":10e-1}`, true, true},
		{"enum number near 1 (json.Number)", numEnum, `{"e":1.00000000000000000001}`, true, false},
		{"enum 0.1", numEnum, `{"e":0.1}`, false, true},
		{"enum 0.1 (json.Number)", numEnum, `{"e":0.10}`, true, true},
		{"enum string 1", numEnum, `{"e":"1"}`, false, true},
		{"enum null", numEnum, `{"e":null}`, false, true},
		{"enum false", numEnum, `{"e":false}`, false, true},
		{"enum true", numEnum, `{"e":true}`, false, false},
		{"enum 2", numEnum, `{"e":2}`, false, false},
		{"enum object", numEnum, `{"e":{}}`, false, false},
		{"const -0 with 0", numEnum, `{"c":0}`, false, true},
		{"const -0 with 0.0 (json.Number)", numEnum, `{"c":0.0}`, true, true},
		{"const -0 with 1", numEnum, `{"c":1}`, false, false},
		{"const 2^53", fastSeeds[5], `{"c":9007199254740992}`, false, true},
		{"const 2^53 with 2^53+1 (json.Number)", fastSeeds[5], `{"c":9007199254740993}`, true, false},
		{"maximum 2^53 with 2^53+1 (json.Number)", fastSeeds[5], `{"d":9007199254740993}`, true, false},
		{"draft-07 keywords", fastSeeds[5], `{"a":"xy","b":{"any":[]}}`, false, true},
		{"nested objects", nested, `{"o":{"p":{"q":"x"}}}`, false, true},
		{"nested required missing", nested, `{"o":{"p":{}}}`, false, false},
		{"nested extra key", nested, `{"o":{"p":{"q":"x","r":1}}}`, false, false},
		{"nested wrong type", nested, `{"o":{"p":[]}}`, false, false},
		{"array items", arrays, `{"a":[0,1,2]}`, false, true},
		{"array minItems", arrays, `{"a":[]}`, false, false},
		{"array maxItems", arrays, `{"a":[0,1,2,3]}`, false, false},
		{"array bad item", arrays, `{"a":[0,-1]}`, false, false},
		{"array items true", arrays, `{"b":[null,{"x":[]}]}`, false, true},
		{"array items on a non-array", arrays, `{"b":"x"}`, false, true},
		{"type integer", types, `{"i":-3}`, false, true},
		{"type integer or null", types, `{"in":null}`, false, true},
		{"type boolean", types, `{"b":false}`, false, true},
		{"type string", types, `{"s":""}`, false, true},
		{"type array", types, `{"a":[1]}`, false, true},
		{"type object", types, `{"o":{}}`, false, true},
		{"type null", types, `{"z":null}`, false, true},
		{"type null with false", types, `{"z":false}`, false, false},
		{"type integer with a string", types, `{"i":"1"}`, false, false},
		{"root not an object", smallSchema, `[]`, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.schema)
			if s.fast == nil {
				t.Fatalf("Compile(%s) built no fast path", tc.schema)
			}
			v := decodeAs(t, tc.in, tc.useNumber)
			if got := s.fast.valid(v); got != tc.want {
				t.Errorf("fast.valid(%s) = %v, want %v", tc.in, got, tc.want)
			}
			// The table's answers are the full validator's.
			if full := s.js.Validate(v) == nil; full != tc.want {
				t.Errorf("full validator on %s: valid = %v, want %v", tc.in, full, tc.want)
			}
		})
	}
}

// TestFastValidGoValues covers values encoding/json never produces: the
// fast path leaves them all to the full validator.
func TestFastValidGoValues(t *testing.T) {
	s := mustCompile(t, `{"properties":{"n":{"type":"number"},"e":{"enum":[1]},"any":{}}}`)
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"struct", map[string]any{"n": struct{}{}}},
		{"int", map[string]any{"n": 3}},
		{"NaN", map[string]any{"n": math.NaN()}},
		{"+Inf", map[string]any{"n": math.Inf(1)}},
		{"bad json.Number", map[string]any{"e": json.Number("01")}},
		{"struct under {}", map[string]any{"any": struct{}{}}},
		{"typed map", map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s.fast.valid(tc.v) {
				t.Errorf("fast.valid(%#v) = true, want false", tc.v)
			}
		})
	}
}

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		in      string
		want    decimal
		wantErr bool
	}{
		{in: "0", want: decimal{}},
		{in: "-0.000e5", want: decimal{}},
		{in: "120", want: decimal{hi: "12", exp: 3}},
		{in: "-1.50", want: decimal{neg: true, hi: "1", lo: "5", exp: 1}},
		{in: "0.0025", want: decimal{lo: "25", exp: -2}},
		{in: "12.5E-3", want: decimal{hi: "12", lo: "5", exp: -1}},
		{in: "1e+2", want: decimal{hi: "1", exp: 3}},
		{in: "", wantErr: true},
		{in: "-", wantErr: true},
		{in: "01", wantErr: true},
		{in: "1.", wantErr: true},
		{in: ".5", wantErr: true},
		{in: "1e", wantErr: true},
		{in: "1e+", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "1x", wantErr: true},
		{in: "NaN", wantErr: true},
	}
	for _, tc := range tests {
		got, ok := parseDecimal(tc.in)
		if ok == tc.wantErr || ok && got != tc.want {
			t.Errorf("parseDecimal(%q) = %+v, %v, want %+v, %v", tc.in, got, ok, tc.want, !tc.wantErr)
		}
	}
}

func TestDecimalCmp(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0", "-0", 0}, {"1", "1.000", 0}, {"100", "1e2", 0}, {"0.01", "1e-2", 0},
		{"1", "2", -1}, {"-1", "-2", 1}, {"-1", "0", -1}, {"0", "1e-400", -1},
		{"9007199254740993", "9007199254740992", 1}, {"0.1", "0.10000000000000000001", -1},
		{"123", "12.3e1", 0}, {"123", "1234e-1", -1}, {"1e1000000000000", "1e300", 1},
		{"-1e1000000000000", "-1e300", -1}, {"1e-1000000000000", "0", 1},
	}
	for _, tc := range tests {
		a, _ := parseDecimal(tc.a)
		b, _ := parseDecimal(tc.b)
		if got := a.cmp(b); got != tc.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := b.cmp(a); got != -tc.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

func TestFastPathDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		schema string
		in     string
	}{
		{smallSchema, `{"text":"hello","n":3}`},
		{fastSeeds[3], `{"ms":5,"f":0.25,"other":"x"}`},
		{fastSeeds[4], `{"x":0.5,"tags":["a",1,0.1],"o":{"d":true}}`},
	} {
		s := mustCompile(t, tc.schema)
		for _, useNumber := range []bool{false, true} {
			v := decodeAs(t, tc.in, useNumber)
			if !s.fast.valid(v) {
				t.Fatalf("fast.valid(%s) = false (json.Number: %v), want true", tc.in, useNumber)
			}
			if n := testing.AllocsPerRun(100, func() { s.Validate(v) }); n != 0 {
				t.Errorf("Validate(%s) (json.Number: %v) allocates %v times, want 0", tc.in, useNumber, n)
			}
		}
	}
}

func decodeAs(t testing.TB, in string, useNumber bool) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(in))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", in, err)
	}
	return v
}

// unmarshal decodes in as exactly one JSON value, numbers as float64 or
// json.Number.
func unmarshal(in []byte, useNumber bool) (any, bool) {
	if !json.Valid(in) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	return v, dec.Decode(&v) == nil
}

// checkAgreement fails t when s's fast path accepts v and the full
// validator rejects it, and, when converse is set, when the full validator
// accepts v and the fast path does not.
func checkAgreement(t *testing.T, s *Schema, v any, in []byte, converse bool) {
	t.Helper()
	full := s.js.Validate(v)
	if got := s.Validate(v); (got == nil) != (full == nil) {
		t.Fatalf("Validate(%s) = %v, but the full validator says %v", in, got, full)
	}
	if s.fast == nil {
		return
	}
	fast := s.fast.valid(v)
	if fast && full != nil {
		t.Fatalf("fast path accepts %s, which the full validator rejects: %v", in, full)
	}
	if converse && !fast && full == nil {
		t.Fatalf("fast path rejects %s, which the full validator accepts", in)
	}
}

// FuzzFastAgreesWithFull checks the fast path against the full validator
// on the seed schemas: it never accepts a value the full validator
// rejects, and where it was built it accepts every value the full
// validator accepts.
func FuzzFastAgreesWithFull(f *testing.F) {
	for i := range fastSeeds {
		for _, in := range []string{
			`{}`, `{"text":"x","n":1}`, `{"text":"éé","n":1e3}`, `{"op":"put","key":"k"}`, `{"ms":5,"f":-0.5}`,
			`{"x":0.5,"tags":["a",0.1]}`, `{"o":{"d":true}}`, `{"a":"xyz","c":9007199254740992}`,
			`{"a":[{"b":[1,2]}]}`, `{"n":0.1}`, `[1]`, `{"tags":[1,1.0]}`, `{"e":1}`,
		} {
			f.Add(uint8(i), []byte(in), i%2 == 0)
		}
	}
	compiled := make([]*Schema, len(fastSeeds))
	for i, raw := range fastSeeds {
		s := mustCompile(f, raw)
		if (s.fast != nil) != (i < fastSubset) {
			f.Fatalf("seed %d: fast path built = %v, want %v", i, s.fast != nil, i < fastSubset)
		}
		compiled[i] = s
	}
	f.Fuzz(func(t *testing.T, which uint8, in []byte, useNumber bool) {
		v, ok := unmarshal(in, useNumber)
		if !ok {
			return
		}
		checkAgreement(t, compiled[int(which)%len(compiled)], v, in, true)
	})
}

// FuzzFastSchemas fuzzes schemas as well as values: whenever a fuzzed
// schema gets a fast path, the fast path agrees with the full validator
// both ways.
func FuzzFastSchemas(f *testing.F) {
	for _, raw := range fastSeeds {
		for _, in := range []string{`{}`, `{"text":"x","n":1}`, `{"ms":5,"f":-0.5}`, `{"x":0.5,"tags":["a",0.1]}`, `{"a":"xyz","c":1}`} {
			f.Add([]byte(raw), []byte(in), false)
		}
	}
	f.Fuzz(func(t *testing.T, raw, in []byte, useNumber bool) {
		s, err := Compile(raw)
		if err != nil {
			return
		}
		v, ok := unmarshal(in, useNumber)
		if !ok {
			return
		}
		checkAgreement(t, s, v, in, true)
	})
}

// BenchmarkValidateFast measures Validate on a small object schema with
// the fast path ("fast") and with the full validator only ("full", as
// before the fast path existed).
func BenchmarkValidateFast(b *testing.B) {
	s := mustCompile(b, smallSchema)
	if s.fast == nil {
		b.Fatal("no fast path for the benchmark schema")
	}
	full := *s
	full.fast = nil
	v := decode(b, `{"text":"hello, world","n":42}`)
	for _, bc := range []struct {
		name string
		s    *Schema
	}{{"fast", s}, {"full", &full}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if vs := bc.s.Validate(v); vs != nil {
					b.Fatal(vs)
				}
			}
		})
	}
}
