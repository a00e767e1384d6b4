package schemas

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

const (
	// maxViolations caps what Validate returns, the summary entry included.
	maxViolations = 50
	// moreFormat is the message of the summary entry.
	moreFormat = "… and %d more"
	// maxEnumShown caps how many allowed values an enum message lists.
	maxEnumShown = 10
	// maxMessage caps a message's length, whatever produced it.
	maxMessage = 1024
)

// Violation is one way a value fails its schema.
type Violation struct {
	// Pointer is the JSON pointer (RFC 6901) of the offending value within
	// the validated instance, e.g. "/items/2"; "" is the instance itself.
	Pointer string
	// Message says what is wrong, e.g. `missing required property "x"` or
	// "expected string, but got number".
	Message string
}

// String returns "<pointer>: <message>", with "/" standing for the root
// pointer.
func (v Violation) String() string {
	p := v.Pointer
	if p == "" {
		p = "/"
	}
	return p + ": " + v.Message
}

// isSummary reports whether v is the entry Validate appends when it leaves
// violations out, and how many it left out.
func (v Violation) isSummary() (int, bool) {
	if v.Pointer != "" || !strings.HasPrefix(v.Message, "… and ") {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(v.Message, moreFormat, &n); err != nil {
		return 0, false
	}
	return n, true
}

// Format renders violations as one text for a model, e.g.
//
//	invalid arguments (2 problems):
//	- /: missing required property "expression"
//	- /precision: expected integer, but got string
//
// It returns "" for no violations. The count includes violations that
// [Schema.Validate] left out.
func Format(vs []Violation) string {
	if len(vs) == 0 {
		return ""
	}
	total := len(vs)
	if n, ok := vs[len(vs)-1].isSummary(); ok {
		total += n - 1
	}
	var b strings.Builder
	b.WriteString("invalid arguments (")
	b.WriteString(strconv.Itoa(total))
	if total == 1 {
		b.WriteString(" problem):")
	} else {
		b.WriteString(" problems):")
	}
	for i, v := range vs {
		b.WriteString("\n- ")
		if _, ok := v.isSummary(); ok && i == len(vs)-1 {
			b.WriteString(v.Message)
			continue
		}
		b.WriteString(v.String())
	}
	return b.String()
}

func sortViolations(vs []Violation) {
	slices.SortFunc(vs, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Pointer, b.Pointer), strings.Compare(a.Message, b.Message))
	})
}

// flattener collects the leaves of a ValidationError tree as Violations.
type flattener struct {
	doc  any    // schema document, for quoting schema values; may be nil
	base string // location prefix of doc's keywords ("<url>#"); "" means none
	// alternatives makes leaves under a failed anyOf/oneOf say which
	// alternative they belong to, so that a model does not read the
	// alternatives' requirements as all applying at once.
	alternatives bool
	out          []Violation
}

func (f *flattener) walk(e *jsonschema.ValidationError, context string) {
	if len(e.Causes) == 0 {
		ptr := cleanPointer(e.InstanceLocation)
		for _, m := range f.messages(e) {
			if context != "" {
				m += " (" + context + ")"
			}
			f.out = append(f.out, Violation{Pointer: ptr, Message: clean(m)})
		}
		return
	}
	kw := lastToken(e.KeywordLocation)
	if f.alternatives && (kw == "anyOf" || kw == "oneOf") && (e.Message == "anyOf failed" || e.Message == "oneOf failed") {
		// Every alternative failed, so Causes holds one error per
		// alternative, in order.
		for i, c := range e.Causes {
			alt := fmt.Sprintf("%s alternative %d of %d", kw, i+1, len(e.Causes))
			if context != "" {
				alt = context + " > " + alt
			}
			f.walk(c, alt)
		}
		return
	}
	for _, c := range e.Causes {
		f.walk(c, context)
	}
}

// messages rewrites a leaf's message into plain English with double-quoted,
// truncated values. It may split one library message into several. It is
// long on purpose: one case per message shape of the validator, read top
// to bottom as a table; split, the table would be in pieces.
func (f *flattener) messages(e *jsonschema.ValidationError) []string {
	msg := e.Message
	if msg == "not allowed" { // a false schema; its keyword location is the schema's own
		return []string{falseSchemaMessage(e.KeywordLocation)}
	}
	switch lastToken(e.KeywordLocation) {
	case "required":
		if names, ok := parseQuotedList(strings.TrimPrefix(msg, "missing properties: ")); ok {
			out := make([]string, len(names))
			for i, n := range names {
				out[i] = "missing required property " + quote(n)
			}
			return out
		}
	case "additionalProperties":
		if list, ok := strings.CutPrefix(msg, "additionalProperties "); ok {
			if names, ok := parseQuotedList(strings.TrimSuffix(list, " not allowed")); ok {
				out := make([]string, len(names))
				for i, n := range names {
					out[i] = "property " + quote(n) + " is not allowed"
				}
				return out
			}
		}
	case "enum":
		if !strings.HasPrefix(msg, "value must be") && msg != "enum failed" {
			break
		}
		if vals, ok := f.keywordValue(e.AbsoluteKeywordLocation).([]any); ok && len(vals) > 0 {
			if len(vals) == 1 {
				return []string{"value must be " + renderValue(vals[0])}
			}
			shown := vals[:min(len(vals), maxEnumShown)]
			parts := make([]string, len(shown))
			for i, v := range shown {
				parts[i] = renderValue(v)
			}
			s := "value must be one of " + strings.Join(parts, ", ")
			if len(vals) > len(shown) {
				s += fmt.Sprintf(" (or %d more)", len(vals)-len(shown))
			}
			return []string{s}
		}
		return []string{strings.ReplaceAll(msg, "<nil>", "null")}
	case "const":
		if !strings.HasPrefix(msg, "value must be") && msg != "const failed" {
			break
		}
		if v, ok := f.keywordLookup(e.AbsoluteKeywordLocation); ok {
			return []string{"value must be " + renderValue(v)}
		}
		return []string{strings.ReplaceAll(msg, "<nil>", "null")}
	case "format":
		m := requote(msg)
		if i := strings.LastIndex(m, " is not valid "); i >= 0 {
			m = m[:i] + " is not a valid " + strings.Trim(m[i+len(" is not valid "):], `"`)
		}
		return []string{m}
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		return []string{strings.Replace(msg, " but found ", ", but found ", 1)}
	case "multipleOf":
		if a, b, ok := strings.Cut(msg, " not multipleOf "); ok {
			return []string{"must be a multiple of " + b + ", but found " + a}
		}
	case "minContains", "maxContains":
		var want, got int
		if _, err := fmt.Sscanf(msg, "valid must be >= %d, but got %d", &want, &got); err == nil {
			return []string{fmt.Sprintf("must contain at least %d matching items, but found %d", want, got)}
		}
		if _, err := fmt.Sscanf(msg, "valid must be <= %d, but got %d", &want, &got); err == nil {
			return []string{fmt.Sprintf("must contain at most %d matching items, but found %d", want, got)}
		}
	case "minProperties":
		var want, got int
		if _, err := fmt.Sscanf(msg, "minimum %d properties allowed, but found %d properties", &want, &got); err == nil {
			return []string{fmt.Sprintf("must have at least %d properties, but found %d", want, got)}
		}
	case "maxProperties":
		var want, got int
		if _, err := fmt.Sscanf(msg, "maximum %d properties allowed, but found %d properties", &want, &got); err == nil {
			return []string{fmt.Sprintf("must have at most %d properties, but found %d", want, got)}
		}
	case "minItems":
		var want, got int
		if _, err := fmt.Sscanf(msg, "minimum %d items required, but found %d items", &want, &got); err == nil {
			return []string{fmt.Sprintf("must have at least %d items, but found %d", want, got)}
		}
	case "maxItems":
		var want, got int
		if _, err := fmt.Sscanf(msg, "maximum %d items required, but found %d items", &want, &got); err == nil {
			return []string{fmt.Sprintf("must have at most %d items, but found %d", want, got)}
		}
	case "uniqueItems":
		var i, j int
		if _, err := fmt.Sscanf(msg, "items at index %d and %d are equal", &i, &j); err == nil {
			return []string{fmt.Sprintf("items must be unique, but items %d and %d are equal", i, j)}
		}
	case "oneOf":
		var i, j int
		if _, err := fmt.Sscanf(msg, "valid against schemas at indexes %d and %d", &i, &j); err == nil {
			return []string{fmt.Sprintf("must match exactly one oneOf alternative, but matches alternatives %d and %d", i+1, j+1)}
		}
	case "not":
		if msg == "not failed" {
			return []string{`must not match the schema under "not"`}
		}
	}
	return []string{requote(msg)}
}

// falseSchemaMessage says why a value failed the schema false, from where
// that schema sits.
func falseSchemaMessage(loc string) string {
	parent := ""
	if i := strings.LastIndexByte(loc, '/'); i >= 0 {
		parent = lastToken(loc[:i])
	}
	switch last := lastToken(loc); {
	case last == "unevaluatedProperties" || last == "additionalProperties" || parent == "properties" || parent == "patternProperties":
		return "property is not allowed"
	case last == "items" || last == "unevaluatedItems" || last == "additionalItems" || parent == "prefixItems":
		return "item is not allowed"
	}
	return "no value is allowed here"
}

// keywordValue returns the schema value at an absolute keyword location
// inside the document, or nil.
func (f *flattener) keywordValue(abs string) any {
	v, _ := f.keywordLookup(abs)
	return v
}

func (f *flattener) keywordLookup(abs string) (any, bool) {
	if f.base == "" || f.doc == nil {
		return nil, false
	}
	frag, ok := strings.CutPrefix(abs, f.base)
	if !ok {
		return nil, false
	}
	return lookup(f.doc, cleanPointer(frag))
}
