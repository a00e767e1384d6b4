package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// docURL is the base URL the schema document is compiled under. Its scheme
// has no loader, and LoadURL refuses everything anyway; it only gives
// relative references something to resolve against.
const docURL = "mem://toolgate/schema.json"

// defaultSchema is what an empty schema means.
var defaultSchema = []byte(`{"type":"object"}`)

// errRemoteRef is what the compiler's loader returns for every URL.
var errRemoteRef = errors.New("references outside the schema document are not loaded")

// formatNames are the formats jsonschema/v5 knows how to assert. Each is
// replaced by an always-true check, so "format" annotates only even in
// drafts before 2019-09, which the library would otherwise assert.
var formatNames = [...]string{
	"date-time", "date", "time", "duration", "period", "hostname", "email",
	"ip-address", "ipv4", "ipv6", "uri", "iri", "uri-reference", "uriref",
	"iri-reference", "uri-template", "regex", "json-pointer",
	"relative-json-pointer", "uuid",
}

// Schema is a compiled JSON Schema. It is immutable and safe for concurrent
// use by any number of goroutines.
type Schema struct {
	js *jsonschema.Schema
	// doc is the decoded schema document (numbers as json.Number), used to
	// quote schema values such as enum members in violation messages.
	doc any
	// base is the root schema's location ("<url>#"); keyword locations
	// under it can be looked up in doc.
	base string
	// fast accepts valid values of simple schemas without the full
	// validator; nil when the schema is not simple.
	fast *fastSchema
}

// CompileError reports a schema that cannot be compiled.
type CompileError struct {
	// Pointer is the JSON pointer of the offending keyword within the
	// schema document; "" when the problem is the document as a whole.
	Pointer string
	// Reason says what is wrong, in English, with quoted values cut to 80
	// bytes.
	Reason string
}

// Error returns "invalid input schema at <pointer>: <reason>", or
// "input schema <reason>" when the problem has no location. Callers
// compiling another kind of schema (an output schema) can build their own
// text from [CompileError.Describe].
func (e *CompileError) Error() string {
	return e.Describe("input")
}

// Describe returns the error's text with what ("input", "output") naming
// the kind of schema.
func (e *CompileError) Describe(what string) string {
	if e.Pointer == "" {
		return what + " schema " + e.Reason
	}
	return "invalid " + what + " schema at " + e.Pointer + ": " + e.Reason
}

// Compile compiles raw, a JSON Schema document. An empty or nil raw means
// {"type":"object"}. The root must describe an object: a boolean schema, or
// a "type" other than "object", is an error.
//
// Compile never loads anything: a reference outside the document is an
// error. Every error is a *[CompileError] naming where the problem is.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = defaultSchema
	}
	doc, err := decodeDocument(raw)
	if err != nil {
		return nil, err
	}
	if err := checkObjectRoot(doc); err != nil {
		return nil, err
	}
	if err := checkRefs(doc); err != nil {
		return nil, err
	}

	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.ExtractAnnotations = false
	c.AssertFormat = false
	c.AssertContent = false
	for _, name := range formatNames {
		c.Formats[name] = acceptAny
	}
	var loaded []string // URLs the compiler tried to load
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		loaded = append(loaded, u)
		return nil, errRemoteRef
	}
	if err := c.AddResource(docURL, bytes.NewReader(raw)); err != nil {
		return nil, &CompileError{Reason: "is not valid JSON: " + clean(trimLibPrefix(err.Error()))}
	}
	js, err := c.Compile(docURL)
	if err != nil {
		return nil, compileError(err, doc, loaded)
	}
	return &Schema{js: js, doc: doc, base: js.Location, fast: buildFast(doc)}, nil
}

func acceptAny(any) bool { return true }

// decodeDocument decodes raw as exactly one JSON value, numbers kept exact.
func decodeDocument(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	err := dec.Decode(&doc)
	if err == nil {
		off := dec.InputOffset()
		if _, terr := dec.Token(); terr != io.EOF {
			off += int64(len(raw[off:]) - len(bytes.TrimLeft(raw[off:], " \t\r\n")))
			err = fmt.Errorf("unexpected data after the schema at byte offset %d", off)
		}
	}
	if err != nil {
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			err = fmt.Errorf("%v at byte offset %d", se, se.Offset)
		}
		return nil, &CompileError{Reason: "is not valid JSON: " + clean(err.Error())}
	}
	return doc, nil
}

// checkObjectRoot enforces MCP's rule that a tool schema describes an
// object.
func checkObjectRoot(doc any) error {
	notObject := &CompileError{Reason: "must describe an object (type: object)"}
	m, ok := doc.(map[string]any)
	if !ok {
		return notObject
	}
	t, ok := m["type"]
	if !ok {
		return nil
	}
	switch t := t.(type) {
	case string:
		if t == "object" {
			return nil
		}
	case []any:
		if len(t) == 1 && t[0] == "object" {
			return nil
		}
	}
	return notObject
}

// compileError turns the library's compile error into a *CompileError with
// a pointer into doc.
func compileError(err error, doc any, loaded []string) error {
	if ve, ok := errors.AsType[*jsonschema.ValidationError](err); ok {
		return metaError(ve, doc)
	}
	if len(loaded) > 0 {
		u := loaded[0]
		ptr, ref := findRef(doc, func(abs string) bool {
			base, _, _ := strings.Cut(abs, "#")
			return base == u
		})
		if ptr == "" {
			ref = u
		}
		return &CompileError{
			Pointer: ptr,
			Reason:  fmt.Sprintf("reference %s points outside the schema document; only local references such as \"#/$defs/name\" are allowed", quote(ref)),
		}
	}
	if loop, ok := errors.AsType[jsonschema.InfiniteLoopError](err); ok {
		ptr := ""
		if _, frag, ok := strings.Cut(string(loop), "#"); ok {
			ptr = cleanPointer(frag)
		}
		return &CompileError{Pointer: ptr, Reason: "references form a cycle that never reaches a schema"}
	}
	msg := trimLibPrefix(err.Error())
	if se, ok := errors.AsType[*jsonschema.SchemaError](err); ok && se.Err != nil {
		msg = trimLibPrefix(se.Err.Error())
	}
	if target, ok := strings.CutSuffix(msg, " not found"); ok {
		if ptr, ref := findRef(doc, func(abs string) bool { return abs == target }); ptr != "" {
			return &CompileError{
				Pointer: ptr,
				Reason:  fmt.Sprintf("reference %s does not point to anything in the schema document", quote(ref)),
			}
		}
	}
	return &CompileError{Reason: "is invalid: " + clean(strings.ReplaceAll(msg, docURL, "the schema"))}
}

func trimLibPrefix(s string) string {
	return strings.TrimPrefix(s, "jsonschema: ")
}

// metaError reports the first location (in pointer order) at which the
// document fails its meta-schema.
func metaError(ve *jsonschema.ValidationError, doc any) error {
	f := flattener{}
	f.walk(ve, "")
	vs := f.out
	if len(vs) == 0 {
		return &CompileError{Reason: "is invalid"}
	}
	sortViolations(vs)
	vs = slices.Compact(vs)
	ptr := vs[0].Pointer
	var msgs []string
	rest := 0
	for _, v := range vs {
		if v.Pointer == ptr {
			msgs = append(msgs, v.Message)
		} else {
			rest++
		}
	}
	reason := strings.Join(msgs, "; ")
	if val, ok := lookup(doc, ptr); ok {
		if r := renderValue(val); !strings.Contains(reason, r) {
			reason = r + " is not valid: " + reason
		}
	}
	switch rest {
	case 0:
	case 1:
		reason += " (and 1 more problem elsewhere)"
	default:
		reason += fmt.Sprintf(" (and %d more problems elsewhere)", rest)
	}
	return &CompileError{Pointer: ptr, Reason: reason}
}

// dataKeywords hold instance data, not schemas: a "$ref" inside them is
// not a reference.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// checkRefs rejects every reference that leaves the document, followed or
// not, so that a schema shown to clients never points elsewhere. A
// reference to a resource embedded with "$id" is local. The library's
// loader refuses anything this misses.
func checkRefs(doc any) error {
	root, _ := url.Parse(docURL)
	known := map[string]bool{docURL: true}
	type ref struct{ ptr, val, abs string }
	var refs []ref
	var walk func(v any, at string, base *url.URL)
	walk = func(v any, at string, base *url.URL) {
		switch v := v.(type) {
		case map[string]any:
			if id, ok := v["$id"].(string); ok {
				if u, err := url.Parse(id); err == nil {
					base = base.ResolveReference(u)
					known[withoutFragment(base)] = true
				}
			}
			for _, k := range refKeywords[:3] {
				if s, ok := v[k].(string); ok {
					if u, err := url.Parse(s); err == nil {
						refs = append(refs, ref{at + "/" + escapeToken(k), s, withoutFragment(base.ResolveReference(u))})
					}
				}
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if !dataKeywords[k] {
					walk(v[k], at+"/"+escapeToken(k), base)
				}
			}
		case []any:
			for i, e := range v {
				walk(e, at+"/"+strconv.Itoa(i), base)
			}
		}
	}
	walk(doc, "", root)
	for _, r := range refs {
		if !known[r.abs] {
			return &CompileError{
				Pointer: r.ptr,
				Reason:  fmt.Sprintf("reference %s points outside the schema document; only local references such as \"#/$defs/name\" are allowed", quote(r.val)),
			}
		}
	}
	return nil
}

func withoutFragment(u *url.URL) string {
	c := *u
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// refKeywords are the keywords whose value is a URI reference to a schema.
var refKeywords = [...]string{"$ref", "$dynamicRef", "$recursiveRef", "$schema"}

// findRef returns the pointer and value of the first reference keyword in
// doc (in sorted key order) whose value, resolved against docURL, satisfies
// match; "" when there is none. Nested "$id"s are not taken into account,
// so a reference they rebase may not be found.
func findRef(doc any, match func(abs string) bool) (ptr, ref string) {
	base, _ := url.Parse(docURL)
	var walk func(v any, at string) bool
	walk = func(v any, at string) bool {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range refKeywords {
				s, ok := v[k].(string)
				if !ok {
					continue
				}
				u, err := url.Parse(s)
				if err != nil {
					continue
				}
				if match(base.ResolveReference(u).String()) {
					ptr, ref = at+"/"+escapeToken(k), s
					return true
				}
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if walk(v[k], at+"/"+escapeToken(k)) {
					return true
				}
			}
		case []any:
			for i, e := range v {
				if walk(e, fmt.Sprintf("%s/%d", at, i)) {
					return true
				}
			}
		}
		return false
	}
	walk(doc, "")
	return ptr, ref
}

// Validate validates v, a value decoded by encoding/json (map[string]any,
// []any, float64 or json.Number, string, bool, nil), and returns every
// violation sorted by pointer then message, or nil when v is valid. At most
// 50 are returned; when there are more, the 50th says how many were left
// out. A value of another Go type gives one violation at the root.
func (s *Schema) Validate(v any) []Violation {
	if s.fast != nil && s.fast.valid(v) {
		return nil
	}
	err := s.js.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		msg := trimLibPrefix(err.Error())
		if t, ok := errors.AsType[jsonschema.InvalidJSONTypeError](err); ok {
			msg = fmt.Sprintf("value is not JSON data (it holds a Go %s)", string(t))
		}
		return []Violation{{Message: clean(msg)}}
	}
	f := flattener{doc: s.doc, base: s.base, alternatives: true}
	f.walk(ve, "")
	vs := f.out
	sortViolations(vs)
	vs = slices.Compact(vs)
	if len(vs) > maxViolations {
		more := len(vs) - (maxViolations - 1)
		vs = append(vs[:maxViolations-1], Violation{Message: fmt.Sprintf(moreFormat, more)})
	}
	return vs
}
