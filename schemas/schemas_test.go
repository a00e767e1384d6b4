package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func mustCompile(t testing.TB, raw string) *Schema {
	t.Helper()
	s, err := Compile(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("Compile(%s) = %v", raw, err)
	}
	return s
}

func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return v
}

const calcSchema = `{
	"type": "object",
	"properties": {
		"expression": {"type": "string"},
		"precision": {"type": "integer", "minimum": 0},
		"mode": {"enum": ["deg", "rad", 3, null]},
		"options": {
			"type": "object",
			"properties": {"items": {"type": "array", "items": {"type": "number"}}},
			"additionalProperties": false
		}
	},
	"required": ["expression"],
	"additionalProperties": false
}`

func TestValidate(t *testing.T) {
	long := strings.Repeat("k", 200)
	tests := []struct {
		name     string
		schema   string
		instance string
		want     []Violation
	}{
		{
			name:     "valid",
			schema:   calcSchema,
			instance: `{"expression": "1+1", "precision": 2, "mode": "rad", "options": {"items": [1, 2.5]}}`,
		},
		{
			name:     "missing required",
			schema:   calcSchema,
			instance: `{}`,
			want:     []Violation{{"", `missing required property "expression"`}},
		},
		{
			name:     "wrong types",
			schema:   calcSchema,
			instance: `{"expression": 5, "precision": "2"}`,
			want: []Violation{
				{"/expression", "expected string, but got number"},
				{"/precision", "expected integer, but got string"},
			},
		},
		{
			name:     "integer must be whole",
			schema:   calcSchema,
			instance: `{"expression": "x", "precision": 2.5}`,
			want:     []Violation{{"/precision", "expected integer, but got number"}},
		},
		{
			name:     "multiple violations listed all",
			schema:   calcSchema,
			instance: `{"precision": -1, "mode": "grad", "extra": true, "other": 1}`,
			want: []Violation{
				{"", `missing required property "expression"`},
				{"", `property "extra" is not allowed`},
				{"", `property "other" is not allowed`},
				{"/mode", `value must be one of "deg", "rad", 3, null`},
				{"/precision", "must be >= 0, but found -1"},
			},
		},
		{
			name:     "nested pointer",
			schema:   calcSchema,
			instance: `{"expression": "x", "options": {"items": [1, "two", 3, false], "bad": 1}}`,
			want: []Violation{
				{"/options", `property "bad" is not allowed`},
				{"/options/items/1", "expected number, but got string"},
				{"/options/items/3", "expected number, but got boolean"},
			},
		},
		{
			name:     "enum single value",
			schema:   `{"properties": {"v": {"enum": [1.50]}}}`,
			instance: `{"v": 2}`,
			want:     []Violation{{"/v", "value must be 1.50"}},
		},
		{
			name:     "const",
			schema:   `{"properties": {"v": {"const": null}, "w": {"const": {"a": [1]}}}}`,
			instance: `{"v": 0, "w": {}}`,
			want: []Violation{
				{"/v", "value must be null"},
				{"/w", `value must be {"a":[1]}`},
			},
		},
		{
			name:     "pointer tokens escaped per RFC 6901",
			schema:   `{"properties": {"a/b~c": {"type": "string"}, "my key": {"type": "string"}}}`,
			instance: `{"a/b~c": 1, "my key": 2}`,
			want: []Violation{
				{"/a~1b~0c", "expected string, but got number"},
				{"/my key", "expected string, but got number"},
			},
		},
		{
			name:     "local $ref and $defs",
			schema:   `{"$defs": {"pos": {"type": "integer", "minimum": 1}}, "properties": {"n": {"$ref": "#/$defs/pos"}, "m": {"$ref": "#/$defs/pos"}}}`,
			instance: `{"n": 0, "m": 3}`,
			want:     []Violation{{"/n", "must be >= 1, but found 0"}},
		},
		{
			name:     "anyOf alternatives are labelled",
			schema:   `{"properties": {"v": {"anyOf": [{"type": "string"}, {"required": ["x"]}]}}}`,
			instance: `{"v": {}}`,
			want: []Violation{
				{"/v", "expected string, but got object (anyOf alternative 1 of 2)"},
				{"/v", `missing required property "x" (anyOf alternative 2 of 2)`},
			},
		},
		{
			name:     "false schema",
			schema:   `{"properties": {"gone": false}}`,
			instance: `{"gone": 1}`,
			want:     []Violation{{"/gone", "property is not allowed"}},
		},
		{
			name:     "unevaluated properties and items",
			schema:   `{"properties": {"a": {}, "l": {"prefixItems": [{}], "items": false}}, "unevaluatedProperties": false}`,
			instance: `{"a": 1, "b": 2, "l": [1, 2]}`,
			want: []Violation{
				{"/b", "property is not allowed"},
				{"/l/1", "item is not allowed"},
			},
		},
		{
			name:     "false schema elsewhere",
			schema:   `{"properties": {"a": {"not": {}, "anyOf": [false]}}}`,
			instance: `{"a": 1}`,
			want: []Violation{
				{"/a", `must not match the schema under "not"`},
				{"/a", "no value is allowed here (anyOf alternative 1 of 1)"},
			},
		},
		{
			name:     "formats annotate only",
			schema:   `{"properties": {"e": {"type": "string", "format": "email"}}}`,
			instance: `{"e": "not an email"}`,
		},
		{
			name:     "formats annotate only in draft-07 too",
			schema:   `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"e": {"format": "date-time"}}}`,
			instance: `{"e": "yesterday"}`,
		},
		{
			name:     "root must be an object",
			schema:   ``,
			instance: `"text"`,
			want:     []Violation{{"", "expected object, but got string"}},
		},
		{
			name:     "huge property name truncated",
			schema:   `{"additionalProperties": false}`,
			instance: `{"` + long + `": 1}`,
			want:     []Violation{{"", `property "` + long[:80] + `…" is not allowed`}},
		},
		{
			name:     "huge pointer token truncated",
			schema:   `{"additionalProperties": {"type": "string"}}`,
			instance: `{"` + long + `": 1}`,
			want:     []Violation{{"/" + long[:80] + "…", "expected string, but got number"}},
		},
		{
			name:     "huge enum member truncated",
			schema:   `{"properties": {"v": {"enum": ["` + long + `", "b"]}}}`,
			instance: `{"v": "c"}`,
			want:     []Violation{{"/v", `value must be one of "` + long[:80] + `…", "b"`}},
		},
		{
			name:     "duplicates removed",
			schema:   `{"allOf": [{"required": ["a"]}, {"required": ["a"]}]}`,
			instance: `{}`,
			want:     []Violation{{"", `missing required property "a"`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.schema)
			got := s.Validate(decode(t, tc.instance))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate(%s) mismatch (-want +got):\n%s", tc.instance, diff)
			}
		})
	}
}

func TestValidateCapsViolations(t *testing.T) {
	s := mustCompile(t, `{"additionalProperties": false}`)
	m := map[string]any{}
	for i := range 120 {
		m[fmt.Sprintf("p%03d", i)] = i
	}
	got := s.Validate(m)
	if len(got) != maxViolations {
		t.Fatalf("Validate returned %d violations, want %d", len(got), maxViolations)
	}
	if want := (Violation{Message: "… and 71 more"}); got[len(got)-1] != want {
		t.Errorf("last violation = %v, want %v", got[len(got)-1], want)
	}
	if want := `property "p000" is not allowed`; got[0].Message != want {
		t.Errorf("first violation = %q, want %q", got[0].Message, want)
	}
	text := Format(got)
	if !strings.HasPrefix(text, "invalid arguments (120 problems):\n") || !strings.HasSuffix(text, "\n- … and 71 more") {
		t.Errorf("Format = %q, want 120 problems and a final summary line", text)
	}
}

func TestValidateNonJSONValue(t *testing.T) {
	s := mustCompile(t, `{"properties": {"n": {"type": "number"}}}`)
	got := s.Validate(map[string]any{"n": struct{}{}})
	if len(got) != 1 || got[0].Pointer != "" || !strings.Contains(got[0].Message, "not JSON data") {
		t.Errorf("Validate(struct) = %v, want one root violation saying the value is not JSON data", got)
	}
	if got := s.Validate(map[string]any{"n": json.Number("3")}); got != nil {
		t.Errorf("Validate(json.Number) = %v, want nil", got)
	}
}

func TestCompile(t *testing.T) {
	notObject := "input schema must describe an object (type: object)"
	tests := []struct {
		name    string
		schema  string
		wantErr string // the exact error text; "" means success
	}{
		{name: "empty means object", schema: ``},
		{name: "whitespace means object", schema: " \n"},
		{name: "no type is fine", schema: `{"properties": {"a": {}}}`},
		{name: "type list of object", schema: `{"type": ["object"]}`},
		{name: "draft-07", schema: `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "definitions": {"a": {"type": "string"}}, "properties": {"a": {"$ref": "#/definitions/a"}}}`},
		{name: "ref to embedded resource", schema: `{"$defs": {"a": {"$id": "a.json", "type": "string"}}, "properties": {"a": {"$ref": "a.json"}}}`},
		{name: "ref-like data in enum is not a ref", schema: `{"properties": {"a": {"enum": [{"$ref": "https://example.com"}]}}}`},
		{
			name:    "unused remote ref refused",
			schema:  `{"$defs": {"unused": {"$ref": "https://example.com/s.json"}}}`,
			wantErr: `invalid input schema at /$defs/unused/$ref: reference "https://example.com/s.json" points outside the schema document; only local references such as "#/$defs/name" are allowed`,
		},
		{
			name:    "bad type with pointer",
			schema:  `{"type": "object", "properties": {"n": {"type": "strnig"}}}`,
			wantErr: `invalid input schema at /properties/n/type: "strnig" is not valid: expected array, but got string; value must be one of "array", "boolean", "integer", "null", "number", "object", "string"`,
		},
		{
			name:    "bad keyword value",
			schema:  `{"properties": {"n": {"minimum": "x"}}}`,
			wantErr: `invalid input schema at /properties/n/minimum: "x" is not valid: expected number, but got string`,
		},
		{
			name:    "bad regex",
			schema:  `{"properties": {"n": {"pattern": "("}}}`,
			wantErr: `invalid input schema at /properties/n/pattern: "(" is not a valid regex`,
		},
		{
			name:    "several problems",
			schema:  `{"properties": {"a": {"minimum": "x"}, "b": {"maxLength": -1}}}`,
			wantErr: `invalid input schema at /properties/a/minimum: "x" is not valid: expected number, but got string (and 1 more problem elsewhere)`,
		},
		{name: "non-object type", schema: `{"type": "array"}`, wantErr: notObject},
		{name: "nullable object", schema: `{"type": ["object", "null"]}`, wantErr: notObject},
		{name: "boolean root", schema: `true`, wantErr: notObject},
		{name: "array root", schema: `[]`, wantErr: notObject},
		{
			name:    "remote ref refused",
			schema:  `{"properties": {"n": {"$ref": "https://example.com/s.json"}}}`,
			wantErr: `invalid input schema at /properties/n/$ref: reference "https://example.com/s.json" points outside the schema document; only local references such as "#/$defs/name" are allowed`,
		},
		{
			name:    "relative ref refused",
			schema:  `{"properties": {"n": {"$ref": "other.json#/a"}}}`,
			wantErr: `invalid input schema at /properties/n/$ref: reference "other.json#/a" points outside the schema document; only local references such as "#/$defs/name" are allowed`,
		},
		{
			name:    "file ref refused",
			schema:  `{"$defs": {"x": {"$ref": "file:///etc/passwd"}}}`,
			wantErr: `invalid input schema at /$defs/x/$ref: reference "file:///etc/passwd" points outside the schema document; only local references such as "#/$defs/name" are allowed`,
		},
		{
			name:    "unknown meta-schema refused",
			schema:  `{"$schema": "https://example.com/meta"}`,
			wantErr: `invalid input schema at /$schema: reference "https://example.com/meta" points outside the schema document; only local references such as "#/$defs/name" are allowed`,
		},
		{
			name:    "dangling local ref",
			schema:  `{"properties": {"n": {"$ref": "#/$defs/missing"}}}`,
			wantErr: `invalid input schema at /properties/n/$ref: reference "#/$defs/missing" does not point to anything in the schema document`,
		},
		{
			name:    "ref cycle",
			schema:  `{"$ref": "#"}`,
			wantErr: `invalid input schema at /$ref: references form a cycle that never reaches a schema`,
		},
		{
			name:    "syntax error",
			schema:  `{"type": }`,
			wantErr: `input schema is not valid JSON: invalid character '}' looking for beginning of value at byte offset 10`,
		},
		{
			name:    "trailing data",
			schema:  `{} {}`,
			wantErr: `input schema is not valid JSON: unexpected data after the schema at byte offset 3`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tc.schema))
			if tc.wantErr == "" {
				if err != nil || s == nil {
					t.Fatalf("Compile(%s) = %v, %v, want a schema", tc.schema, s, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Compile(%s) succeeded, want error %q", tc.schema, tc.wantErr)
			}
			if _, ok := errors.AsType[*CompileError](err); !ok {
				t.Errorf("Compile(%s) error is %T, want *CompileError", tc.schema, err)
			}
			if got := err.Error(); got != tc.wantErr {
				t.Errorf("Compile(%s) error =\n%s\nwant\n%s", tc.schema, got, tc.wantErr)
			}
		})
	}
}

func TestCompileErrorDescribe(t *testing.T) {
	tests := []struct {
		name string
		err  CompileError
		want string
	}{
		{"with pointer", CompileError{Pointer: "/type", Reason: "bad"}, "invalid output schema at /type: bad"},
		{"without pointer", CompileError{Reason: "must describe an object (type: object)"}, "output schema must describe an object (type: object)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Describe("output"); got != tc.want {
				t.Errorf("Describe(output) = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		in   []Violation
		want string
	}{
		{name: "none", in: nil, want: ""},
		{
			name: "one",
			in:   []Violation{{"/a", "expected string, but got number"}},
			want: "invalid arguments (1 problem):\n- /a: expected string, but got number",
		},
		{
			name: "two",
			in: []Violation{
				{"", `missing required property "expression"`},
				{"/precision", "expected integer, but got string"},
			},
			want: "invalid arguments (2 problems):\n- /: missing required property \"expression\"\n- /precision: expected integer, but got string",
		},
		{
			name: "summary counts what was left out",
			in:   []Violation{{"/a", "x"}, {"", "… and 5 more"}},
			want: "invalid arguments (6 problems):\n- /a: x\n- … and 5 more",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Format(tc.in); got != tc.want {
				t.Errorf("Format(%v) =\n%q\nwant\n%q", tc.in, got, tc.want)
			}
		})
	}
}

func TestValidateConcurrent(t *testing.T) {
	s := mustCompile(t, calcSchema)
	good := decode(t, `{"expression": "1"}`)
	bad := decode(t, `{"expression": 1}`)
	var wg sync.WaitGroup
	errs := make([]string, 8)
	for i := range errs {
		wg.Go(func() {
			for range 200 {
				if vs := s.Validate(good); vs != nil {
					errs[i] = fmt.Sprintf("Validate(good) = %v", vs)
					return
				}
				if vs := s.Validate(bad); len(vs) != 1 {
					errs[i] = fmt.Sprintf("Validate(bad) = %v", vs)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
}

func FuzzFormat(f *testing.F) {
	s, err := Compile(json.RawMessage(calcSchema))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{}`, `{"expression": 1}`, `[]`, `null`, `"x"`,
		`{"options": {"items": [1, "a", {}], "x\u00e9": null}, "mode": "\ud800"}`,
		`{"` + strings.Repeat("é", 100) + `": "v"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		vs := s.Validate(v)
		if len(vs) > maxViolations {
			t.Fatalf("Validate returned %d violations, more than %d", len(vs), maxViolations)
		}
		for _, x := range vs {
			if x.Pointer != "" && x.Pointer[0] != '/' {
				t.Errorf("pointer %q does not start with /", x.Pointer)
			}
			if x.Message == "" {
				t.Errorf("empty message at %q", x.Pointer)
			}
		}
		out := Format(vs)
		if !utf8.ValidString(out) {
			t.Errorf("Format output is not valid UTF-8: %q", out)
		}
		if (len(vs) == 0) != (out == "") {
			t.Errorf("Format(%d violations) = %q", len(vs), out)
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, `{
		"type": "object",
		"properties": {
			"expression": {"type": "string", "maxLength": 1000},
			"precision": {"type": "integer", "minimum": 0, "maximum": 20}
		},
		"required": ["expression"],
		"additionalProperties": false
	}`)
	v := decode(b, `{"expression": "2*(3+4)", "precision": 4}`)
	b.ReportAllocs()
	for b.Loop() {
		if vs := s.Validate(v); vs != nil {
			b.Fatal(vs)
		}
	}
}

// FuzzCompile feeds arbitrary documents to Compile: it must not panic, and
// every error must be a *CompileError with valid UTF-8 text.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		calcSchema, `{}`, `true`, `{"$ref": "#"}`, `{"$schema": 5}`, `{"$id": 7}`,
		`{"properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$id": "x.json", "$ref": "y.json"}}}`,
		`{"$schema": "http://json-schema.org/draft-04/schema#", "id": "a", "properties": {"a": {"$ref": "#"}}}`,
		`{"$dynamicRef": "#x", "$defs": {"d": {"$dynamicAnchor": "x"}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Compile(raw)
		if err != nil {
			if _, ok := errors.AsType[*CompileError](err); !ok {
				t.Fatalf("Compile error %T is not *CompileError: %v", err, err)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("Compile error is not valid UTF-8: %q", err.Error())
			}
			return
		}
		_ = s.Validate(map[string]any{"a": []any{1.0, "x", nil}})
	})
}
