package config

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"

	"github.com/goccy/go-yaml/ast"
)

// decodeJSON stores the YAML subtree n, found at path, into v, a
// [json.RawMessage], as compact JSON: a REST tool's body or input schema is
// written in YAML and sent or compiled as JSON. Mapping keys keep their
// order; a key that is not a string (1:, true:, null:) is an error, since
// JSON has none. Strings have ${...} expanded like any scalar, and a string
// stays a string even when its value looks like a number. No value (a key
// with nothing after it, or null) leaves v nil: no body, or a derived
// schema.
func (d *decoder) decodeJSON(path string, n ast.Node, v reflect.Value, depth int) {
	if _, null := n.(*ast.NullNode); null {
		v.SetZero()
		return
	}
	b, ok := d.appendJSON(nil, path, n, depth)
	d.jsonBytes += len(b)
	if !ok {
		return
	}
	v.SetBytes(b)
}

// maxJSONBytes caps the JSON that the body and input_schema values of one
// file add up to. Aliases can repeat a value, so a short file could
// otherwise expand into gigabytes ("billion laughs"); every node appends at
// least one byte, so the cap bounds the work too.
const maxJSONBytes = 4 << 20

// appendJSON appends n as JSON to b. ok is false if any part of n could
// not be converted; the errors are recorded and b is then of no use. One
// case per YAML node type, as decode has: a table, kept whole.
func (d *decoder) appendJSON(b []byte, path string, n ast.Node, depth int) (_ []byte, ok bool) {
	if n == nil {
		return append(b, "null"...), true
	}
	p := nodePos(n)
	switch {
	case d.jsonBytes+len(b) > maxJSONBytes:
		if !d.jsonTooBig {
			d.jsonTooBig = true
			d.errorf(p, path, "body and input_schema values add up to more than %d MiB of JSON; shrink them, or use fewer aliases of large values", maxJSONBytes>>20)
		}
		return b, false
	case depth > maxDepth:
		d.errorf(p, path, "nested too deeply")
		return b, false
	}
	switch x := n.(type) {
	case *ast.CommentGroupNode:
		return append(b, "null"...), true
	case *ast.AnchorNode:
		b, ok = d.appendJSON(b, path, x.Value, depth+1)
		d.anchor(x) // after its value, so an anchor cannot refer to itself
		return b, ok
	case *ast.AliasNode:
		target, found := d.alias(x, p, path)
		if !found {
			return b, false
		}
		return d.appendJSON(b, path, target, depth+1)
	case *ast.TagNode:
		if !d.strTag(x, p, path) {
			return b, false
		}
	case *ast.MappingNode:
		return d.appendJSONObject(b, path, x, depth)
	case *ast.SequenceNode:
		ok = true
		b = append(b, '[')
		for i, el := range x.Values {
			if i > 0 {
				b = append(b, ',')
			}
			var elOK bool
			b, elOK = d.appendJSON(b, path+"["+strconv.Itoa(i)+"]", el, depth+1)
			ok = ok && elOK
		}
		return append(b, ']'), ok
	}

	s, isScalar, ok := d.toScalar(path, n)
	switch {
	case !isScalar:
		d.errorf(p, path, "%s cannot be written as JSON; use a mapping, a list or a scalar", collectionName(n))
		return b, false
	case !ok:
		return b, false
	}
	switch s.kind {
	case "null":
		return append(b, "null"...), true
	case "boolean":
		return strconv.AppendBool(b, s.node.(*ast.BoolNode).Value), true
	case "integer":
		switch iv := s.node.(*ast.IntegerNode).Value.(type) {
		case int64:
			return strconv.AppendInt(b, iv, 10), true
		case uint64:
			return strconv.AppendUint(b, iv, 10), true
		}
	case "number":
		if f, isFloat := s.node.(*ast.FloatNode); isFloat && !math.IsInf(f.Value, 0) && !math.IsNaN(f.Value) {
			return strconv.AppendFloat(b, f.Value, 'g', -1, 64), true
		}
		d.errorf(p, path, "JSON has no infinity or NaN; quote the value to send it as a string")
		return b, false
	case "string":
		return appendJSONString(b, s.text), true
	}
	d.errorf(p, path, "internal error: config cannot write %s as JSON", s.kind)
	return b, false
}

// appendJSONObject appends mapping m as a JSON object, keys in file order.
func (d *decoder) appendJSONObject(b []byte, path string, m *ast.MappingNode, depth int) (_ []byte, ok bool) {
	ok = true
	b = append(b, '{')
	seen := map[string]pos{}
	for _, mv := range m.Values {
		key, keyNode, keyOK := d.key(path, mv)
		if !keyOK {
			ok = false
			continue
		}
		kp := nodePos(keyNode)
		cp := childPath(path, key)
		if _, isString := keyNode.(*ast.StringNode); !isString {
			d.errorf(kp, cp, "JSON keys are strings; quote this key, like %s", strconv.Quote(key))
			ok = false
			continue
		}
		if first, dup := seen[key]; dup {
			d.errorf(kp, cp, "duplicate key; it is already set at line %d", first.line)
			ok = false
			continue
		}
		seen[key] = kp
		if len(seen) > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, key)
		b = append(b, ':')
		var valueOK bool
		b, valueOK = d.appendJSON(b, cp, mv.Value, depth+1)
		ok = ok && valueOK
	}
	return append(b, '}'), ok
}

// appendJSONString appends s as a JSON string. Unlike [json.Marshal] it
// leaves <, > and & alone, so the JSON reads as the file does.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		plain = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Encoding a string cannot fail: invalid UTF-8 becomes U+FFFD.
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
