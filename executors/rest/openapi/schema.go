package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

const (
	// oapiMaxRefDepth is how many $refs deep a schema is inlined before
	// the rest is replaced with {"type":"object"}: recursive schemas have
	// no end.
	oapiMaxRefDepth = 10
	// oapiMaxInlined caps how many $refs one operation's schema inlines,
	// so a schema that recurses in several places cannot grow to 3^10
	// copies before oapiMaxRefDepth stops it.
	oapiMaxInlined = 2000
	// oapiMaxSchemaBytes caps a tool's input schema: one over it is
	// inlined again at the next of oapiCutDepths.
	oapiMaxSchemaBytes = 128 << 10
)

// oapiCutDepths are the $ref depths an input schema over
// oapiMaxSchemaBytes is tried at, in order, until it fits.
var oapiCutDepths = []int{6, 4, 3, 2, 1, 0}

// oapiSchemaConv turns OpenAPI schemas into self-contained JSON Schema
// 2020-12 values (map[string]any or bool), for one operation.
type oapiSchemaConv struct {
	// cache is shared by the operations of one document.
	cache *oapiCache
	// maxDepth is how many $refs deep schemas are inlined (at most
	// oapiMaxRefDepth); negative: no schema is converted, each is {}.
	maxDepth int
	// size estimates the bytes of JSON converted so far; once it passes
	// oapiMaxSchemaBytes, over is set and the rest converts to {}: the
	// result is thrown away, and inlined again less deep.
	size int
	over bool
	// inlined counts the $refs inlined so far.
	inlined int
	// notes are warnings, each given once.
	notes []string
}

func (sc *oapiSchemaConv) note(msg string) {
	if !slices.Contains(sc.notes, msg) {
		sc.notes = append(sc.notes, msg)
	}
}

// oapiSubschemaKeys are the keywords whose values hold schemas; they are
// converted from the Schema's fields, not from its encoding.
var oapiSubschemaKeys = []string{
	"items", "properties", "additionalProperties", "allOf", "anyOf", "oneOf", "not",
	"prefixItems", "contains", "patternProperties", "dependentSchemas", "propertyNames",
	"unevaluatedItems", "unevaluatedProperties", "if", "then", "else", "contentSchema",
}

// oapiDroppedKeys are OpenAPI-only keywords, and identifiers that mean
// nothing once every $ref is inlined.
var oapiDroppedKeys = []string{
	"discriminator", "xml", "externalDocs", "nullable", "allowEmptyValue",
	"$defs", "$id", "$schema", "$anchor", "$dynamicAnchor", "$dynamicRef", "$comment",
}

// oapiHoistedKeys are annotations kept on the outside when a nullable
// schema without a type is wrapped in anyOf.
var oapiHoistedKeys = []string{"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}

// ref converts sr, inlining its target; depth counts the $refs already
// inlined on the way here. request drops readOnly properties.
func (sc *oapiSchemaConv) ref(sr *openapi3.SchemaRef, depth int, request bool) any {
	if sr == nil || sc.maxDepth < 0 || sc.over {
		return map[string]any{}
	}
	if sr.Ref != "" {
		if depth >= sc.maxDepth || sc.inlined >= oapiMaxInlined {
			if sc.maxDepth == oapiMaxRefDepth {
				sc.note(fmt.Sprintf(`schema references nest deeper than %d levels at %s (a recursive schema); replaced with {"type":"object"} there`,
					oapiMaxRefDepth, sr.Ref))
			}
			return map[string]any{"type": "object"}
		}
		depth++
		sc.inlined++
	}
	if sr.Value == nil {
		return map[string]any{}
	}
	return sc.schema(sr.Value, depth, request)
}

func (sc *oapiSchemaConv) refs(srs openapi3.SchemaRefs, depth int, request bool) []any {
	out := make([]any, 0, len(srs))
	for _, sr := range srs {
		out = append(out, sc.ref(sr, depth, request))
	}
	return out
}

func (sc *oapiSchemaConv) schemaMap(m openapi3.Schemas, depth int, request bool) map[string]any {
	out := make(map[string]any, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = sc.ref(m[k], depth, request)
	}
	return out
}

func (sc *oapiSchemaConv) boolSchema(bs openapi3.BoolSchema, depth int, request bool) (any, bool) {
	switch {
	case bs.Schema != nil:
		return sc.ref(bs.Schema, depth, request), true
	case bs.Has != nil:
		return *bs.Has, true
	}
	return nil, false
}

// schema converts one schema whose $ref, if any, is already followed.
func (sc *oapiSchemaConv) schema(s *openapi3.Schema, depth int, request bool) any {
	if s.Always != nil {
		return *s.Always
	}
	m, size, err := sc.cache.keywords(s)
	if err != nil {
		sc.note(fmt.Sprintf("a schema could not be converted (%v); it accepts any value instead", err))
		return map[string]any{}
	}
	for k := range s.Properties {
		size += len(k) + 4
	}
	if sc.size += size; sc.size > oapiMaxSchemaBytes {
		sc.over = true
	}
	oapi30Keywords(m)
	if p, ok := m["pattern"].(string); ok {
		if !sc.cache.goRegexp(p) {
			delete(m, "pattern")
			sc.note(fmt.Sprintf("pattern %q is not a Go regular expression; dropped", p))
		}
	}
	if v := s.Items; v != nil {
		m["items"] = sc.ref(v, depth, request)
	}
	if len(s.Properties) > 0 {
		sc.properties(m, s, depth, request)
	}
	if v, ok := sc.boolSchema(s.AdditionalProperties, depth, request); ok {
		m["additionalProperties"] = v
	}
	sc.subschemas(m, s, depth, request)
	if s.Nullable {
		return oapiNullable(m)
	}
	return m
}

// oapi30Keywords translates OpenAPI 3.0's keywords in m to 2020-12's.
func oapi30Keywords(m map[string]any) {
	// OpenAPI 3.0's example becomes 2020-12's examples.
	if ex, ok := m["example"]; ok {
		delete(m, "example")
		if _, ok := m["examples"]; !ok {
			m["examples"] = []any{ex}
		}
	}
	// OpenAPI 3.0's boolean exclusiveMinimum modifies minimum; 2020-12's
	// is the bound itself.
	for _, k := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		excl, bound := k[0], k[1]
		if on, ok := m[excl].(bool); ok {
			delete(m, excl)
			if v, ok := m[bound]; ok && on {
				m[excl] = v
				delete(m, bound)
			}
		}
	}
}

// properties sets m's properties, converted from s's, without the
// readOnly ones in a request, and its required without the properties
// left out.
func (sc *oapiSchemaConv) properties(m map[string]any, s *openapi3.Schema, depth int, request bool) {
	props := make(map[string]any, len(s.Properties))
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		v := s.Properties[k]
		if request && v != nil && v.Value != nil && v.Value.ReadOnly {
			continue // readOnly properties SHOULD NOT be sent in requests
		}
		props[k] = sc.ref(v, depth, request)
	}
	m["properties"] = props
	if req, ok := m["required"].([]any); ok {
		req = slices.DeleteFunc(slices.Clone(req), func(r any) bool {
			name, _ := r.(string)
			_, kept := props[name]
			_, declared := s.Properties[name]
			return declared && !kept
		})
		if len(req) == 0 {
			delete(m, "required")
		} else {
			m["required"] = req
		}
	}
}

// subschemas sets m's keywords that hold schemas, converted from s's,
// but items, properties and additionalProperties.
func (sc *oapiSchemaConv) subschemas(m map[string]any, s *openapi3.Schema, depth int, request bool) {
	// Fixed order, so that notes come out in the same order every time.
	for _, kv := range []struct {
		key  string
		refs openapi3.SchemaRefs
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}, {"prefixItems", s.PrefixItems}} {
		if len(kv.refs) > 0 {
			m[kv.key] = sc.refs(kv.refs, depth, request)
		}
	}
	for _, kv := range []struct {
		key string
		ref *openapi3.SchemaRef
	}{
		{"not", s.Not}, {"contains", s.Contains}, {"propertyNames", s.PropertyNames},
		{"if", s.If}, {"then", s.Then}, {"else", s.Else}, {"contentSchema", s.ContentSchema},
	} {
		if kv.ref != nil {
			m[kv.key] = sc.ref(kv.ref, depth, request)
		}
	}
	for _, kv := range []struct {
		key     string
		schemas openapi3.Schemas
	}{{"patternProperties", s.PatternProperties}, {"dependentSchemas", s.DependentSchemas}} {
		if len(kv.schemas) > 0 {
			m[kv.key] = sc.schemaMap(kv.schemas, depth, request)
		}
	}
	for _, kv := range []struct {
		key string
		bs  openapi3.BoolSchema
	}{{"unevaluatedItems", s.UnevaluatedItems}, {"unevaluatedProperties", s.UnevaluatedProperties}} {
		if out, ok := sc.boolSchema(kv.bs, depth, request); ok {
			m[kv.key] = out
		}
	}
}

// oapiCache keeps what converting a schema computes that does not
// depend on where the schema is used: large documents reuse schemas in
// hundreds of operations.
type oapiCache struct {
	kw       map[*openapi3.Schema]oapiKeywordsResult
	patterns map[string]bool
}

type oapiKeywordsResult struct {
	m    map[string]any
	size int // bytes of m as JSON
	err  error
}

// keywords returns a copy of oapiKeywords(s) that the caller may change
// (the top level only: the values are shared), and its size as JSON.
func (c *oapiCache) keywords(s *openapi3.Schema) (map[string]any, int, error) {
	r, ok := c.kw[s]
	if !ok {
		if c.kw == nil {
			c.kw = make(map[*openapi3.Schema]oapiKeywordsResult)
		}
		r.m, r.size, r.err = oapiKeywords(s)
		c.kw[s] = r
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	return maps.Clone(r.m), r.size, nil
}

// goRegexp reports whether Go's regexp compiles p.
func (c *oapiCache) goRegexp(p string) bool {
	ok, seen := c.patterns[p]
	if !seen {
		if c.patterns == nil {
			c.patterns = make(map[string]bool)
		}
		_, err := regexp.Compile(p)
		ok = err == nil
		c.patterns[p] = ok
	}
	return ok
}

// oapiKeywords returns s's keywords that hold no schema, as plain JSON values,
// without the dropped ones and extensions, and their size as JSON.
func oapiKeywords(s *openapi3.Schema) (map[string]any, int, error) {
	y, err := s.MarshalYAML()
	if err != nil {
		return nil, 0, err
	}
	m, ok := y.(map[string]any)
	if !ok {
		return nil, 0, fmt.Errorf("unexpected encoding %T", y)
	}
	for _, k := range slices.Concat(oapiSubschemaKeys, oapiDroppedKeys) {
		delete(m, k)
	}
	for k := range m {
		if strings.HasPrefix(k, "x-") {
			delete(m, k)
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, 0, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, 0, err
	}
	return out, len(raw), nil
}

// oapiNullable applies OpenAPI 3.0's nullable: true to m: "null" joins
// its type (and enum); a schema without a type becomes
// anyOf [m, {"type":"null"}].
func oapiNullable(m map[string]any) map[string]any {
	switch t := m["type"].(type) {
	case string:
		m["type"] = []any{t, "null"}
	case []any:
		if !slices.Contains(t, any("null")) {
			m["type"] = slices.Concat(t, []any{"null"})
		}
	default:
		outer := map[string]any{"anyOf": []any{m, map[string]any{"type": "null"}}}
		for _, k := range oapiHoistedKeys {
			if v, ok := m[k]; ok {
				outer[k] = v
				delete(m, k)
			}
		}
		return outer
	}
	if enum, ok := m["enum"].([]any); ok && !slices.Contains(enum, nil) {
		m["enum"] = slices.Concat(enum, []any{nil})
	}
	return m
}
