// Package jsonscan reads the few members a hot path needs from a JSON
// message without decoding it or allocating: the members of a request's
// _meta (gateway/internal/reqmeta), an upstream's result of one of
// toolgate's requests (executors/mcpup). It validates structure only
// as far as it reads; a caller falls back to encoding/json whenever it
// reports false.
package jsonscan

// FoldEq reports whether key equals word, an ASCII word in lower case,
// with the letters of key in either case, as encoding/json matches keys
// (other bytes must be equal). Keys from PlainString are ASCII.
func FoldEq(key []byte, word string) bool {
	if len(key) != len(word) {
		return false
	}
	for i := range len(key) {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}

// MaxDepth bounds how deep the objects and arrays a Scanner reads may
// nest: a message past it is refused (the caller falls back to
// encoding/json, which has a bound of its own), so that a body of nothing
// but brackets cannot grow a goroutine's stack without end.
const MaxDepth = 1000

// Scanner is a minimal JSON reader over b: it validates structure well
// enough to find keys, skipping values it is not asked about.
type Scanner struct {
	b     []byte
	i     int
	depth int // objects and arrays open
}

// New returns a scanner at the start of b.
func New(b []byte) *Scanner { return &Scanner{b: b} }

// Pos is the offset of the next byte to read.
func (s *Scanner) Pos() int { return s.i }

// Next is the next byte to read after white space (it skips the white
// space), and false at the end.
func (s *Scanner) Next() (byte, bool) {
	s.WS()
	if s.i >= len(s.b) {
		return 0, false
	}
	return s.b[s.i], true
}

// Done skips white space and reports whether the input is all read.
func (s *Scanner) Done() bool {
	s.WS()
	return s.i == len(s.b)
}

// WS skips white space.
func (s *Scanner) WS() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Object reads an object, calling member for each key with the scanner
// positioned before the value; member must consume the value.
func (s *Scanner) Object(member func(key []byte) bool) bool {
	return s.list('{', '}', func() bool {
		key, ok := s.PlainString()
		if !ok {
			return false
		}
		s.WS()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		return member(key)
	})
}

// Array reads an array, calling item for each element with the scanner
// positioned before it; item must consume it.
func (s *Scanner) Array(item func() bool) bool { return s.list('[', ']', item) }

// list reads the comma-separated items between open and close (an
// object's members, an array's elements), calling item for each; item must
// consume it.
func (s *Scanner) list(open, close byte, item func() bool) bool {
	s.WS()
	if s.i >= len(s.b) || s.b[s.i] != open || s.depth >= MaxDepth {
		return false
	}
	s.depth++
	defer func() { s.depth-- }()
	s.i++
	s.WS()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return true
	}
	for {
		if !item() {
			return false
		}
		s.WS()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case close:
			s.i++
			return true
		default:
			return false
		}
	}
}

// PlainString reads a string of printable ASCII without escapes (tool
// names, methods and the keys that matter are such strings) and returns its
// bytes.
func (s *Scanner) PlainString() ([]byte, bool) {
	s.WS()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// Raw skips one JSON value and returns its bytes, a slice of the input.
func (s *Scanner) Raw() ([]byte, bool) {
	s.WS()
	start := s.i
	if !s.Value() {
		return nil, false
	}
	return s.b[start:s.i], true
}

// Value skips one JSON value.
func (s *Scanner) Value() bool {
	s.WS()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.Object(func([]byte) bool { return s.Value() })
	case c == '[':
		return s.list('[', ']', s.Value)
	case c == '"':
		for j := s.i + 1; j < len(s.b); j++ {
			switch s.b[j] {
			case '\\':
				j++
			case '"':
				s.i = j + 1
				return true
			}
		}
		return false
	default:
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.i > start
			}
			s.i++
		}
		return s.i > start
	}
}
