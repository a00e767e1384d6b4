package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
)

// ArgsSum returns the SHA-256 of the canonical form ([JSON]) of a call's
// arguments: raw, the bytes the caller sent, when they hold anything but
// whitespace or null; else decoded encoded with encoding/json. Absent and
// null arguments (raw empty or null, and decoded nil or encoding to null)
// are {}. So the same arguments hash alike however they are spaced, their
// keys ordered or their numbers spelt (1, 1.0 and 1e0 are one value).
//
// It is the one hash by which toolgate tells two calls' arguments apart:
// the loop guard's (internal/loopguard) and a continued request's binding
// to the request it continues. The error is raw's when raw is not one
// JSON value, or decoded's when it does not encode.
func ArgsSum(raw json.RawMessage, decoded any) ([32]byte, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		raw = nil
	}
	if raw == nil && decoded != nil {
		b, err := json.Marshal(decoded)
		if err != nil {
			return [32]byte{}, err
		}
		raw = b
	}
	if raw == nil || string(raw) == "null" {
		raw = []byte("{}")
	}
	if isCanonical(raw) {
		return sha256.Sum256(raw), nil
	}
	canon, err := JSON(raw)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(canon), nil
}

// isCanonical reports whether data is already exactly what [JSON] makes
// of it, for a common subset: no whitespace, strings of printable
// ASCII without escapes, integers without trailing zeros (10 is 1e1 in
// canonical form), the literals, and objects with their keys in strictly
// ascending order. It reports false for anything else, which
// [JSON] then rewrites. A model's arguments are usually in this
// subset, so [ArgsSum] hashes them without decoding them (issue 16:
// JSON took 19 allocations for {"message":"hello"}).
func isCanonical(data []byte) bool {
	n, ok := canonValue(data, 0, 0)
	return ok && n == len(data)
}

// canonMaxDepth bounds the nesting isCanonical follows; deeper values go
// to [JSON].
const canonMaxDepth = 32

// canonValue checks the value at d[i:] and returns the index after it.
// A scanner: one case per JSON value kind, kept in one function so the
// hot path (every call's arguments) makes no further calls for objects
// and arrays.
func canonValue(d []byte, i, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '{':
		if depth >= canonMaxDepth {
			return i, false
		}
		if i+1 < len(d) && d[i+1] == '}' {
			return i + 2, true
		}
		var prev []byte
		for i++; ; i++ {
			j, ok := canonString(d, i)
			if !ok {
				return j, false
			}
			key := d[i+1 : j-1]
			if prev != nil && bytes.Compare(prev, key) >= 0 {
				return j, false // out of order, or a duplicate (the last would win)
			}
			prev = key
			if j >= len(d) || d[j] != ':' {
				return j, false
			}
			if i, ok = canonValue(d, j+1, depth+1); !ok || i >= len(d) {
				return i, false
			}
			if d[i] == '}' {
				return i + 1, true
			}
			if d[i] != ',' {
				return i, false
			}
		}
	case c == '[':
		if depth >= canonMaxDepth {
			return i, false
		}
		if i+1 < len(d) && d[i+1] == ']' {
			return i + 2, true
		}
		for i++; ; i++ {
			var ok bool
			if i, ok = canonValue(d, i, depth+1); !ok || i >= len(d) {
				return i, false
			}
			if d[i] == ']' {
				return i + 1, true
			}
			if d[i] != ',' {
				return i, false
			}
		}
	case c == '"':
		return canonString(d, i)
	case c == 't':
		return canonLiteral(d, i, "true")
	case c == 'f':
		return canonLiteral(d, i, "false")
	case c == 'n':
		return canonLiteral(d, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return canonInteger(d, i)
	}
	return i, false
}

// canonString checks the string at d[i:]: printable ASCII, no escapes.
func canonString(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '"' {
		return i, false
	}
	for i++; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return i, false
		}
	}
	return i, false
}

func canonLiteral(d []byte, i int, lit string) (int, bool) {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// canonInteger checks the number at d[i:]: 0, or an integer with no
// leading or trailing zeros and no fraction or exponent (-0 is 0).
func canonInteger(d []byte, i int) (int, bool) {
	neg := d[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	switch {
	case i == start:
		return i, false
	case d[start] == '0' && (i-start > 1 || neg):
		return i, false
	case d[i-1] == '0' && i-start > 1:
		return i, false
	case i < len(d) && (d[i] == '.' || d[i] == 'e' || d[i] == 'E'):
		return i, false
	}
	return i, true
}

// RawSum is [ArgsSum] of raw alone, and total: raw that is not one JSON
// value hashes as it is (the same malformed arguments sent twice are the
// same arguments).
func RawSum(raw []byte) [32]byte {
	sum, err := ArgsSum(raw, nil)
	if err != nil {
		return sha256.Sum256(raw)
	}
	return sum
}
