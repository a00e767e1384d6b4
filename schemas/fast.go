package schemas

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxFastDepth is how deeply subschemas may nest below the root (depth 0)
// for a schema to get a fast path.
const maxFastDepth = 4

// fastSchema is an allocation-free validator for a simple subset of JSON
// Schema: "type", "properties", "required", a boolean
// "additionalProperties", scalar "enum" and "const", string lengths,
// numeric bounds, "items" and item counts, and annotations. It is only
// used to accept valid values quickly. When it says no, the full validator
// decides and writes the messages; when a schema uses anything outside the
// subset, there is no fastSchema at all.
//
// It must never accept a value the full validator rejects; fast_test.go
// fuzzes the two against each other. Numbers are compared exactly, as the
// library does with big.Rat: a float64 value stands for its shortest
// decimal form (fmt.Sprint), and a schema number is only supported when it
// equals the shortest form of its float64, so that comparing float64s is
// comparing the library's rationals. json.Number values are compared as
// decimals.
type fastSchema struct {
	anything bool  // the boolean schema true
	types    uint8 // bit set of the allowed types; 0 means any
	enum     []scalar
	hasEnum  bool
	konst    scalar
	hasConst bool
	props    []fastProp
	required []string
	closed   bool // additionalProperties: false
	minLen   int  // -1 when absent, as for maxLen, minItems and maxItems
	maxLen   int
	minItems int
	maxItems int
	items    *fastSchema // nil when absent
	bounds   []bound
}

// fastProp is one entry of "properties".
type fastProp struct {
	name   string
	schema *fastSchema
}

// Type bits. An integral number has both tNumber and tInteger.
const (
	tObject uint8 = 1 << iota
	tString
	tNumber
	tInteger
	tBoolean
	tArray
	tNull
)

// scalar is a string, number, boolean or null: an enum or const member, or
// an instance value being compared with one.
type scalar struct {
	kind uint8 // tString, tNumber, tBoolean or tNull
	s    string
	b    bool
	f    float64 // the number, for float64 instances
	d    decimal // the number, for json.Number instances
	// exact says d, not f, holds an instance's number.
	exact bool
}

// equal reports whether the schema member s equals the instance value v as
// JSON Schema compares them (numbers by value).
func (s *scalar) equal(v *scalar) bool {
	if s.kind != v.kind {
		return false
	}
	switch s.kind {
	case tString:
		return s.s == v.s
	case tBoolean:
		return s.b == v.b
	case tNumber:
		if v.exact {
			return s.d.cmp(v.d) == 0
		}
		return s.f == v.f
	}
	return true // null
}

// bound is one of minimum, maximum, exclusiveMinimum, exclusiveMaximum.
type bound struct {
	lower  bool // minimum or exclusiveMinimum
	strict bool // exclusive
	f      float64
	d      decimal
}

// admits reports whether a value that compares c (-1, 0, +1) to the bound
// is allowed.
func (b *bound) admits(c int) bool {
	if b.lower {
		c = -c
	}
	return c < 0 || c == 0 && !b.strict
}

// buildFast returns the fast validator of the decoded schema document doc
// (numbers as json.Number), or nil when doc uses anything outside the
// subset.
func buildFast(doc any) *fastSchema {
	f, ok := fastFrom(doc, 0)
	if !ok {
		return nil
	}
	return f
}

func fastFrom(doc any, depth int) (*fastSchema, bool) {
	if depth > maxFastDepth {
		return nil, false
	}
	if b, ok := doc.(bool); ok {
		// false is left to the full validator, which says why.
		return &fastSchema{anything: true}, b
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	f := &fastSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	for k, v := range m {
		ok := true
		switch k {
		case "title", "description", "default", "examples", "$comment", "format", "readOnly", "writeOnly", "deprecated":
			// Annotations only; Compile makes every format an annotation.
		case "$schema":
			s, _ := v.(string)
			ok = depth == 0 && fastDraft(s)
		case "type":
			f.types, ok = typeSet(v)
		case "properties":
			ok = f.addProps(v, depth)
		case "required":
			f.required, ok = stringList(v)
		case "additionalProperties":
			var b bool
			b, ok = v.(bool)
			f.closed = !b
		case "enum":
			f.enum, ok = scalarList(v)
			f.hasEnum = true
		case "const":
			f.konst, ok = scalarOf(v)
			f.hasConst = true
		case "minLength":
			f.minLen, ok = count(v)
		case "maxLength":
			f.maxLen, ok = count(v)
		case "minItems":
			f.minItems, ok = count(v)
		case "maxItems":
			f.maxItems, ok = count(v)
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			b := bound{lower: k == "minimum" || k == "exclusiveMinimum", strict: strings.HasPrefix(k, "exclusive")}
			b.f, b.d, ok = number(v)
			f.bounds = append(f.bounds, b)
		case "items":
			f.items, ok = fastFrom(v, depth+1)
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return f, true
}

// fastDraft reports whether the "$schema" URI s names a draft whose
// semantics the subset follows: 2020-12, or draft-07 (whose numeric
// keywords have the same, numeric form).
func fastDraft(s string) bool {
	switch s {
	case "https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#",
		"http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-07/schema#",
		"https://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema#":
		return true
	}
	return false
}

func typeBit(name string) uint8 {
	switch name {
	case "object":
		return tObject
	case "string":
		return tString
	case "number":
		return tNumber
	case "integer":
		return tInteger
	case "boolean":
		return tBoolean
	case "array":
		return tArray
	case "null":
		return tNull
	}
	return 0
}

// typeSet reads a "type" value: a type name or a list of them.
func typeSet(v any) (uint8, bool) {
	if s, ok := v.(string); ok {
		t := typeBit(s)
		return t, t != 0
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return 0, false
	}
	var set uint8
	for _, e := range list {
		s, _ := e.(string)
		t := typeBit(s)
		if t == 0 {
			return 0, false
		}
		set |= t
	}
	return set, true
}

func (f *fastSchema) addProps(v any, depth int) bool {
	props, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for name, sub := range props {
		fs, ok := fastFrom(sub, depth+1)
		if !ok {
			return false
		}
		f.props = append(f.props, fastProp{name, fs})
	}
	return true
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// scalarList reads an enum. An empty one is left out of the subset: the
// library ignores it.
func scalarList(v any) ([]scalar, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	out := make([]scalar, 0, len(list))
	for _, e := range list {
		s, ok := scalarOf(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// scalarOf reads an enum or const member; objects and arrays are outside
// the subset.
func scalarOf(v any) (scalar, bool) {
	switch x := v.(type) {
	case string:
		return scalar{kind: tString, s: x}, true
	case bool:
		return scalar{kind: tBoolean, b: x}, true
	case nil:
		return scalar{kind: tNull}, true
	case json.Number:
		f, d, ok := number(x)
		return scalar{kind: tNumber, f: f, d: d}, ok
	}
	return scalar{}, false
}

// number reads a schema number. It is supported only when comparing
// float64 values with its float64 gives the library's answer: the library
// compares big.Rat values, taking a float64 instance as its shortest
// decimal form, so the number must equal the shortest form of its own
// float64 (0.5 and 1e-9 do; 0.1000000000000000000001 does not).
func number(v any) (float64, decimal, bool) {
	jn, ok := v.(json.Number)
	if !ok {
		return 0, decimal{}, false
	}
	d, ok := parseDecimal(string(jn))
	if !ok {
		return 0, decimal{}, false
	}
	f, err := strconv.ParseFloat(string(jn), 64)
	if err != nil {
		return 0, decimal{}, false
	}
	exact, ok1 := new(big.Rat).SetString(string(jn))
	short, ok2 := new(big.Rat).SetString(fmt.Sprint(f))
	if !ok1 || !ok2 || exact.Cmp(short) != 0 {
		return 0, decimal{}, false
	}
	return f, d, true
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

// valid reports whether v certainly satisfies f; false means "ask the full
// validator". It does not allocate.
func (f *fastSchema) valid(v any) bool {
	if f.anything {
		return true
	}
	var sv scalar
	switch x := v.(type) {
	case map[string]any:
		return f.validObject(x)
	case []any:
		return f.validArray(x)
	case string:
		sv = scalar{kind: tString, s: x}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
		sv = scalar{kind: tNumber, f: x}
	case json.Number:
		d, ok := parseDecimal(string(x))
		if !ok {
			return false
		}
		sv = scalar{kind: tNumber, d: d, exact: true}
	case bool:
		sv = scalar{kind: tBoolean, b: x}
	case nil:
		sv = scalar{kind: tNull}
	default:
		return false // not JSON data; the full validator reports it
	}
	return f.validScalar(&sv)
}

func (f *fastSchema) validScalar(v *scalar) bool {
	t := v.kind
	if t == tNumber && v.isInteger() {
		t |= tInteger
	}
	if f.types != 0 && f.types&t == 0 {
		return false
	}
	if f.hasConst && !f.konst.equal(v) {
		return false
	}
	if f.hasEnum {
		found := false
		for i := range f.enum {
			if f.enum[i].equal(v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	switch v.kind {
	case tString:
		// A string has at most len(s) runes: count only when that matters.
		if f.minLen > 0 || f.maxLen >= 0 && len(v.s) > f.maxLen {
			n := utf8.RuneCountInString(v.s)
			if n < f.minLen || f.maxLen >= 0 && n > f.maxLen {
				return false
			}
		}
	case tNumber:
		for i := range f.bounds {
			b := &f.bounds[i]
			var c int
			if v.exact {
				c = v.d.cmp(b.d)
			} else {
				c = cmp.Compare(v.f, b.f)
			}
			if !b.admits(c) {
				return false
			}
		}
	}
	return true
}

func (s *scalar) isInteger() bool {
	if s.exact {
		return s.d.isInteger()
	}
	return s.f == math.Trunc(s.f) // finite: valid rejects NaN and ±Inf
}

func (f *fastSchema) validObject(x map[string]any) bool {
	if f.types != 0 && f.types&tObject == 0 || f.hasEnum || f.hasConst {
		return false
	}
	for _, r := range f.required {
		if _, ok := x[r]; !ok {
			return false
		}
	}
	known := 0
	for i := range f.props {
		p := &f.props[i]
		e, ok := x[p.name]
		if !ok {
			continue
		}
		if !p.schema.valid(e) {
			return false
		}
		known++
	}
	return !f.closed || known == len(x)
}

func (f *fastSchema) validArray(x []any) bool {
	if f.types != 0 && f.types&tArray == 0 || f.hasEnum || f.hasConst {
		return false
	}
	if len(x) < f.minItems || f.maxItems >= 0 && len(x) > f.maxItems {
		return false
	}
	if f.items != nil {
		for _, e := range x {
			if !f.items.valid(e) {
				return false
			}
		}
	}
	return true
}

// decimal is an exact decimal number 0.d₁d₂…dₙ × 10^exp, its digits the
// concatenation hi+lo (two pieces of the literal it was parsed from, so
// parsing does not allocate) without leading or trailing zeros. Zero has
// no digits and neg false.
type decimal struct {
	neg    bool
	hi, lo string
	exp    int
}

// maxExp caps the exponent parsed from a literal; larger exponents keep
// their sign and order against every schema number.
const maxExp = 1 << 30

// parseDecimal parses s, which must be a JSON number. A scanner over the
// number grammar (sign, digits, fraction, exponent), kept in one function
// on purpose: it runs for every number of every validated argument.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[start:i]
	if intPart == "" || len(intPart) > 1 && intPart[0] == '0' {
		return decimal{}, false
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if frac = s[start:i]; frac == "" {
			return decimal{}, false
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		start = i
		for ; i < len(s) && isDigit(s[i]); i++ {
			if exp < maxExp {
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if i == start {
			return decimal{}, false
		}
		if neg {
			exp = -exp
		}
	}
	if i != len(s) {
		return decimal{}, false
	}
	// I.F × 10^e = 0.IF × 10^(len(I)+e); with no integer digits, leading
	// zeros of F move the point instead.
	if intPart = strings.TrimLeft(intPart, "0"); intPart == "" {
		trimmed := strings.TrimLeft(frac, "0")
		exp -= len(frac) - len(trimmed)
		frac = trimmed
	} else {
		exp += len(intPart)
	}
	if frac = strings.TrimRight(frac, "0"); frac == "" {
		intPart = strings.TrimRight(intPart, "0")
	}
	if intPart == "" && frac == "" {
		return decimal{}, true
	}
	d.hi, d.lo, d.exp = intPart, frac, exp
	return d, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (d decimal) digits() int { return len(d.hi) + len(d.lo) }

func (d decimal) digit(i int) byte {
	if i < len(d.hi) {
		return d.hi[i]
	}
	return d.lo[i-len(d.hi)]
}

func (d decimal) sign() int {
	switch {
	case d.digits() == 0:
		return 0
	case d.neg:
		return -1
	}
	return 1
}

func (d decimal) isInteger() bool { return d.exp >= d.digits() }

// cmp compares d and e by value: -1, 0 or +1.
func (d decimal) cmp(e decimal) int {
	sd, se := d.sign(), e.sign()
	if sd != se || sd == 0 {
		return cmp.Compare(sd, se)
	}
	// Same sign, both non-zero, both normalised: compare magnitudes.
	c := cmp.Compare(d.exp, e.exp)
	if c == 0 {
		n, m := d.digits(), e.digits()
		for i := 0; i < min(n, m) && c == 0; i++ {
			c = cmp.Compare(d.digit(i), e.digit(i))
		}
		if c == 0 {
			c = cmp.Compare(n, m)
		}
	}
	return c * sd
}
