package canonjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// DuplicateKey reports the first member name that appears twice in one
// object of data, a valid JSON value: the JSON Pointer (RFC 6901) of that
// object and the name. Names compare as JSON reads them ("a" and "\u0061"
// are one name). JSON readers disagree about duplicates (encoding/json
// keeps the last, others the first, some refuse), so a value with one
// means different things to different readers: toolgate refuses such tool
// arguments rather than check one reading and forward another.
func DuplicateKey(data []byte) (pointer, name string, found bool) {
	if isCanonical(data) { // keys strictly ascending: no duplicate
		return "", "", false
	}
	_, dup := dupValue(data, 0)
	if dup == nil {
		return "", "", false
	}
	return toPointer(dup.path), dup.name, true
}

// dup is a duplicate name found: the name and, innermost last once the
// scan has unwound, the names and indexes leading to its object.
type dup struct {
	name string
	path []string
}

// dupValue scans the value at d[i:] (after whitespace) for a duplicate
// name, and returns the index after the value. Nothing is allocated
// unless a duplicate is found or a name has escapes.
func dupValue(d []byte, i int) (int, *dup) {
	i = skipSpace(d, i)
	if i >= len(d) {
		return i, nil
	}
	switch d[i] {
	case '{':
		return dupObject(d, i)
	case '[':
		i = skipSpace(d, i+1)
		for n := 0; i < len(d) && d[i] != ']'; n++ {
			var found *dup
			if i, found = dupValue(d, i); found != nil {
				found.path = append(found.path, strconv.Itoa(n))
				return i, found
			}
			i = skipSpace(d, i)
			if i < len(d) && d[i] == ',' {
				i = skipSpace(d, i+1)
			}
		}
		return i + 1, nil
	case '"':
		return stringEnd(d, i), nil
	}
	for i < len(d) { // a number or a literal
		switch d[i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return i, nil
		}
		i++
	}
	return i, nil
}

// dupObject is dupValue of the object at d[i].
func dupObject(d []byte, i int) (int, *dup) {
	var buf [16][]byte
	names := buf[:0]
	i = skipSpace(d, i+1)
	for i < len(d) && d[i] != '}' {
		j := stringEnd(d, i)
		key := memberName(d[i:j])
		for _, n := range names {
			if bytes.Equal(n, key) {
				return j, &dup{name: string(key)}
			}
		}
		names = append(names, key)
		i = skipSpace(d, j) // at ':'
		var found *dup
		if i, found = dupValue(d, i+1); found != nil {
			found.path = append(found.path, string(key))
			return i, found
		}
		i = skipSpace(d, i)
		if i < len(d) && d[i] == ',' {
			i = skipSpace(d, i+1)
		}
	}
	return i + 1, nil
}

// memberName is the name a quoted member name q reads as.
func memberName(q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	var s string
	_ = json.Unmarshal(q, &s) // valid JSON: a string always decodes
	return []byte(s)
}

// stringEnd returns the index after the string starting at d[i].
func stringEnd(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// toPointer is the JSON Pointer of rev, a path innermost first ("" for
// the whole value).
func toPointer(rev []string) string {
	var b strings.Builder
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, p := range slices.Backward(rev) {
		b.WriteByte('/')
		b.WriteString(esc.Replace(p))
	}
	return b.String()
}
