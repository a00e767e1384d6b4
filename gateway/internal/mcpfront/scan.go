package mcpfront

// scanCall reads, without allocating, what the front end needs from one
// JSON-RPC message: its method, its id member's raw value (nil when it has
// none; see isRequestID) and the string value of params.name. ok is false
// when the message is not a single well-formed JSON object, or when a
// string that matters uses escapes: callers then fall back to
// encoding/json.
func scanCall(msg []byte) (method, name, id []byte, ok bool) {
	s := scanner{b: msg}
	// Keys match case-insensitively, as encoding/json (and so mcp-go) matches
	// them.
	if !s.object(func(key []byte) bool {
		switch {
		case asciiFold(key, "method"):
			method, ok = s.plainString()
			return ok
		case asciiFold(key, "id"):
			s.ws()
			start := s.i
			if !s.value() {
				return false
			}
			id = msg[start:s.i]
			return true
		case asciiFold(key, "params"):
			s.ws()
			if s.i < len(s.b) && s.b[s.i] != '{' {
				return s.value()
			}
			return s.object(func(key []byte) bool {
				if asciiFold(key, "name") {
					name, ok = s.plainString()
					return ok
				}
				return s.value()
			})
		}
		return s.value()
	}) {
		return nil, nil, nil, false
	}
	s.ws()
	return method, name, id, s.i == len(s.b)
}

// isRequestID reports whether id, an id member's raw value from scanCall,
// makes its message a request: present and not null.
func isRequestID(id []byte) bool { return id != nil && string(id) != "null" }

// asciiFold reports whether key equals the lower-case ASCII word,
// ignoring case. Keys are ASCII here (plainString refuses anything else).
func asciiFold(key []byte, word string) bool {
	if len(key) != len(word) {
		return false
	}
	for i := range len(key) {
		if c := key[i] | 0x20; c != word[i] {
			return false
		}
	}
	return true
}

// scanner is a minimal JSON reader over b: it validates structure well
// enough to find keys, skipping values it is not asked about.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object reads an object, calling member for each key with the scanner
// positioned before the value; member must consume the value.
func (s *scanner) object(member func(key []byte) bool) bool {
	return s.list('{', '}', func() bool {
		key, ok := s.plainString()
		if !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		return member(key)
	})
}

// list reads the comma-separated items between open and close (an
// object's members, an array's elements), calling item for each; item must
// consume it.
func (s *scanner) list(open, close byte, item func() bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != open {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return true
	}
	for {
		if !item() {
			return false
		}
		s.ws()
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

// plainString reads a string of printable ASCII without escapes (tool
// names, methods and the keys that matter are such strings) and returns its
// bytes.
func (s *scanner) plainString() ([]byte, bool) {
	s.ws()
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

// value skips one JSON value.
func (s *scanner) value() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func([]byte) bool { return s.value() })
	case c == '[':
		return s.list('[', ']', s.value)
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
