package mcpfront

import "github.com/toolgate/toolgate/internal/jsonscan"

// scanCall reads, without allocating, what the front end needs from one
// JSON-RPC message: its method, its id member's raw value (nil when it has
// none; see isRequestID) and the string value of params.name. ok is false
// when the message is not a single well-formed JSON object, or when a
// string that matters uses escapes: callers then fall back to
// encoding/json.
func scanCall(msg []byte) (method, name, id []byte, ok bool) {
	s := jsonscan.New(msg)
	// Keys match case-insensitively, as encoding/json (and so mcp-go) matches
	// them.
	if !s.Object(func(key []byte) bool {
		switch {
		case jsonscan.FoldEq(key, "method"):
			method, ok = s.PlainString()
			return ok
		case jsonscan.FoldEq(key, "id"):
			id, ok = s.Raw()
			return ok
		case jsonscan.FoldEq(key, "params"):
			if c, more := s.Next(); more && c != '{' {
				return s.Value()
			}
			return s.Object(func(key []byte) bool {
				if jsonscan.FoldEq(key, "name") {
					name, ok = s.PlainString()
					return ok
				}
				return s.Value()
			})
		}
		return s.Value()
	}) {
		return nil, nil, nil, false
	}
	return method, name, id, s.Done()
}

// isRequestID reports whether id, an id member's raw value from scanCall,
// makes its message a request: present and not null.
func isRequestID(id []byte) bool { return id != nil && string(id) != "null" }
