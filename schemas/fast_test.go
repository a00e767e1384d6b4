package schemas

import (
	"encoding/json"
	"testing"
)

// fastSeeds are schemas inside the fast subset, and a few outside it.
var fastSeeds = []string{
	`{"type":"object","properties":{"text":{"type":"string","maxLength":20},"n":{"type":"integer"}},"required":["text"],"additionalProperties":false}`,
	`{"type":"object","properties":{"expression":{"type":"string","minLength":1,"maxLength":4096}},"required":["expression"],"additionalProperties":false}`,
	`{"type":"object","properties":{"op":{"type":"string","enum":["put","get","list","clear"]},"key":{"type":"string","minLength":1,"maxLength":256},"value":{"type":"string","maxLength":65536}},"required":["op"],"additionalProperties":false}`,
	`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":60000}},"required":["ms"]}`,
	`{"type":"object","properties":{"x":{"type":["number","null"],"exclusiveMinimum":0,"exclusiveMaximum":1.5},"tags":{"type":"array","items":{"enum":["a","b",1,true,null]},"minItems":1,"maxItems":3},"o":{"type":"object","properties":{"d":{"type":"boolean"}},"required":["d"]}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"description":"any","maxLength":2},"b":true}}`,
	`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}`,      // outside: pattern
	`{"type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{}}}`, // outside: $ref
	`{"type":"object","additionalProperties":{"type":"string"}}`,                 // outside: schema-valued
}

func TestFastPathBuiltOnlyForTheSubset(t *testing.T) {
	for i, raw := range fastSeeds {
		s, err := Compile(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("Compile(seed %d): %v", i, err)
		}
		if want := i < 6; (s.fast != nil) != want {
			t.Errorf("seed %d: fast path built = %v, want %v", i, s.fast != nil, want)
		}
	}
}

func TestFastPathDecisions(t *testing.T) {
	s, err := Compile(json.RawMessage(fastSeeds[4]))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{}`, true},
		{`{"x":1}`, true},
		{`{"x":1.5}`, false}, // exclusive maximum
		{`{"x":0}`, false},   // exclusive minimum
		{`{"x":null}`, true},
		{`{"x":"1"}`, false},
		{`{"tags":["a",1,true,null]}`, false}, // maxItems 3
		{`{"tags":["a",1.0,null]}`, true},     // 1.0 equals enum member 1
		{`{"tags":[]}`, false},                // minItems
		{`{"tags":["c"]}`, false},
		{`{"o":{}}`, false},
		{`{"o":{"d":false},"other":[1]}`, true}, // additional properties allowed
		{`[]`, false},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.in), &v); err != nil {
			t.Fatal(err)
		}
		if got := s.fast.valid(v); got != tc.want {
			t.Errorf("fast.valid(%s) = %v, want %v", tc.in, got, tc.want)
		}
		if full := len(s.Validate(v)) == 0; full != tc.want {
			t.Errorf("Validate(%s) valid = %v, want %v", tc.in, full, tc.want)
		}
	}
	u, _ := Compile(json.RawMessage(fastSeeds[0]))
	var long any
	_ = json.Unmarshal([]byte(`{"text":"ééééééééééééééééééé"}`), &long) // 19 runes, 38 bytes
	if !u.fast.valid(long) {
		t.Error("maxLength counted bytes, not runes")
	}
	var integral any
	_ = json.Unmarshal([]byte(`{"text":"x","n":3.0}`), &integral)
	if !u.fast.valid(integral) {
		t.Error("3.0 was not accepted as an integer")
	}
}

func TestFastPathDoesNotAllocate(t *testing.T) {
	s, err := Compile(json.RawMessage(fastSeeds[0]))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{"text": "hello", "n": 3.0}
	if n := testing.AllocsPerRun(100, func() { s.Validate(v) }); n != 0 {
		t.Errorf("Validate of a valid value allocates %v times, want 0", n)
	}
}

// FuzzFastAgreesWithFull checks the fast path against the full validator:
// it never accepts a value the full validator rejects, and for schemas in
// the subset it accepts every value the full validator accepts.
func FuzzFastAgreesWithFull(f *testing.F) {
	for i := range fastSeeds {
		for _, in := range []string{`{}`, `{"text":"x","n":1}`, `{"op":"put","key":"k"}`, `{"ms":5}`, `{"x":0.5,"tags":["a"]}`, `{"a":"xyz"}`, `[1]`, `{"tags":[1,1.0]}`} {
			f.Add(uint8(i), []byte(in))
		}
	}
	compiled := make([]*Schema, len(fastSeeds))
	for i, raw := range fastSeeds {
		s, err := Compile(json.RawMessage(raw))
		if err != nil {
			f.Fatal(err)
		}
		compiled[i] = s
	}
	f.Fuzz(func(t *testing.T, which uint8, in []byte) {
		s := compiled[int(which)%len(compiled)]
		var v any
		if json.Unmarshal(in, &v) != nil || s.fast == nil {
			return
		}
		fastOK := s.fast.valid(v)
		fullOK := s.js.Validate(v) == nil
		if fastOK && !fullOK {
			t.Fatalf("fast path accepts %s, the full validator rejects it", in)
		}
		if fullOK && !fastOK {
			t.Fatalf("fast path rejects %s, which the full validator accepts", in)
		}
	})
}
