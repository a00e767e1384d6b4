package schemas

import (
	"encoding/json"
	"math"
	"unicode/utf8"
)

// fastSchema is an allocation-free validator for a simple subset of JSON
// Schema (types, properties, required, additionalProperties as a boolean,
// enums of scalars, string lengths, numeric bounds, items and their
// counts). It is only used to accept valid values quickly: when it says
// no, or when a schema uses anything outside the subset (then there is no
// fastSchema at all), the full validator decides and writes the messages.
// FuzzFastAgreesWithFull checks that it never accepts what the full
// validator rejects.
type fastSchema struct {
	anything   bool  // the boolean schema true
	types      uint8 // bit set of the allowed types; 0 means any
	enum       []any // string, float64, bool or nil members; nil means no enum
	props      map[string]*fastSchema
	required   []string
	closed     bool // additionalProperties: false
	minLen     int  // -1 when absent
	maxLen     int
	min, max   float64
	exMin      float64
	exMax      float64
	hasMin     bool
	hasMax     bool
	hasExMin   bool
	hasExMax   bool
	items      *fastSchema
	minItems   int // -1 when absent
	maxItems   int
	hasStrings bool // any string keyword, so lengths must be counted
}

const (
	tObject uint8 = 1 << iota
	tString
	tNumber
	tInteger
	tBoolean
	tArray
	tNull
)

var typeBits = map[string]uint8{
	"object": tObject, "string": tString, "number": tNumber, "integer": tInteger,
	"boolean": tBoolean, "array": tArray, "null": tNull,
}

// annotations are keywords that never affect validity (formats are
// compiled as annotations only).
var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "$comment": true,
	"format": true, "readOnly": true, "writeOnly": true, "deprecated": true,
}

// fastSchemas are the $schema values whose semantics the subset follows.
var fastSchemas = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema": true,
	"http://json-schema.org/draft-07/schema#":      true,
	"http://json-schema.org/draft-07/schema":       true,
}

// buildFast returns the fast validator of the decoded schema document doc
// (numbers as json.Number), or nil when doc uses anything outside the
// subset.
func buildFast(doc any) *fastSchema {
	f, ok := fastFrom(doc, 0, true)
	if !ok {
		return nil
	}
	return f
}

func fastFrom(doc any, depth int, root bool) (*fastSchema, bool) {
	if depth > 6 {
		return nil, false
	}
	if b, ok := doc.(bool); ok {
		return &fastSchema{anything: true}, b // false schemas are left to the full validator
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	f := &fastSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	for k, v := range m {
		switch {
		case annotations[k]:
		case k == "$schema":
			s, _ := v.(string)
			if !root || !fastSchemas[s] {
				return nil, false
			}
		case k == "type":
			switch t := v.(type) {
			case string:
				if typeBits[t] == 0 {
					return nil, false
				}
				f.types |= typeBits[t]
			case []any:
				for _, e := range t {
					s, _ := e.(string)
					if typeBits[s] == 0 {
						return nil, false
					}
					f.types |= typeBits[s]
				}
			default:
				return nil, false
			}
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			f.props = make(map[string]*fastSchema, len(props))
			for name, sub := range props {
				fs, ok := fastFrom(sub, depth+1, false)
				if !ok {
					return nil, false
				}
				f.props[name] = fs
			}
		case k == "required":
			list, ok := v.([]any)
			if !ok {
				return nil, false
			}
			for _, e := range list {
				s, ok := e.(string)
				if !ok {
					return nil, false
				}
				f.required = append(f.required, s)
			}
		case k == "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil, false
			}
			f.closed = !b
		case k == "enum":
			list, ok := v.([]any)
			if !ok {
				return nil, false
			}
			f.enum = make([]any, 0, len(list))
			for _, e := range list {
				switch x := e.(type) {
				case string, bool, nil:
					f.enum = append(f.enum, x)
				case json.Number:
					n, err := x.Float64()
					if err != nil {
						return nil, false
					}
					f.enum = append(f.enum, n)
				default:
					return nil, false
				}
			}
		case k == "minLength" || k == "maxLength" || k == "minItems" || k == "maxItems":
			n, ok := count(v)
			if !ok {
				return nil, false
			}
			switch k {
			case "minLength":
				f.minLen, f.hasStrings = n, true
			case "maxLength":
				f.maxLen, f.hasStrings = n, true
			case "minItems":
				f.minItems = n
			case "maxItems":
				f.maxItems = n
			}
		case k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum":
			jn, ok := v.(json.Number)
			if !ok {
				return nil, false
			}
			n, err := jn.Float64()
			if err != nil || math.IsInf(n, 0) {
				return nil, false
			}
			switch k {
			case "minimum":
				f.min, f.hasMin = n, true
			case "maximum":
				f.max, f.hasMax = n, true
			case "exclusiveMinimum":
				f.exMin, f.hasExMin = n, true
			case "exclusiveMaximum":
				f.exMax, f.hasExMax = n, true
			}
		case k == "items":
			it, ok := fastFrom(v, depth+1, false)
			if !ok {
				return nil, false
			}
			f.items = it
		default:
			return nil, false
		}
	}
	return f, true
}

// count reads a non-negative integer keyword value.
func count(v any) (int, bool) {
	jn, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	n, err := jn.Int64()
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

// valid reports whether v certainly satisfies f. It does not allocate.
func (f *fastSchema) valid(v any) bool {
	if f.anything {
		return true
	}
	if f.types != 0 && !f.typeOK(v) {
		return false
	}
	if f.enum != nil && !f.inEnum(v) {
		return false
	}
	switch x := v.(type) {
	case string:
		if f.hasStrings {
			n := utf8.RuneCountInString(x)
			if f.minLen >= 0 && n < f.minLen || f.maxLen >= 0 && n > f.maxLen {
				return false
			}
		}
	case float64:
		if f.hasMin && x < f.min || f.hasMax && x > f.max || f.hasExMin && x <= f.exMin || f.hasExMax && x >= f.exMax {
			return false
		}
	case json.Number:
		return false // exactness matters; the full validator decides
	case map[string]any:
		for _, r := range f.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		for k, e := range x {
			sub, ok := f.props[k]
			if !ok {
				if f.closed {
					return false
				}
				continue
			}
			if !sub.valid(e) {
				return false
			}
		}
	case []any:
		if f.minItems >= 0 && len(x) < f.minItems || f.maxItems >= 0 && len(x) > f.maxItems {
			return false
		}
		if f.items != nil {
			for _, e := range x {
				if !f.items.valid(e) {
					return false
				}
			}
		}
	}
	return true
}

func (f *fastSchema) typeOK(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return f.types&tObject != 0
	case string:
		return f.types&tString != 0
	case float64:
		if f.types&tNumber != 0 {
			return true
		}
		return f.types&tInteger != 0 && x == math.Trunc(x) && !math.IsInf(x, 0)
	case bool:
		return f.types&tBoolean != 0
	case []any:
		return f.types&tArray != 0
	case nil:
		return f.types&tNull != 0
	}
	return false
}

func (f *fastSchema) inEnum(v any) bool {
	for _, e := range f.enum {
		switch x := v.(type) {
		case string:
			if s, ok := e.(string); ok && s == x {
				return true
			}
		case float64:
			if n, ok := e.(float64); ok && n == x {
				return true
			}
		case bool:
			if b, ok := e.(bool); ok && b == x {
				return true
			}
		case nil:
			if e == nil {
				return true
			}
		}
	}
	return false
}
