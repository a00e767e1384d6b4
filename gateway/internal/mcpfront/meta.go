package mcpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/threadctx"
)

// requestMeta is a request's params._meta as the front reads it, decoded
// once with the message: the members the front decides on, typed, and the
// object as sent for what is passed on (a tools/call's _meta to its tool,
// the trace context). It reads what mcp.Meta and its accessors read
// (ProtocolVersion, ClientInfo, ClientCapabilities, LogLevel: a member
// that does not decode into its type is absent; a _meta mcp.Meta refuses
// is refused) without their map of every member, its values decoded into
// maps, and the re-encoding of each value an accessor reads.
type requestMeta struct {
	// raw is the object as sent; nil when it has no member but
	// progressToken.
	raw json.RawMessage
	// others: raw has a member neither progressToken nor the protocol's
	// own (io.modelcontextprotocol/...).
	others bool
	// progressToken is nil when absent (or null).
	progressToken mcp.ProgressToken
	// protocolVersion is io.modelcontextprotocol/protocolVersion; ""
	// when absent or not a string.
	protocolVersion string
	clientInfo      *mcp.Implementation     // io.modelcontextprotocol/clientInfo; nil when absent or not one
	caps            *mcp.ClientCapabilities // io.modelcontextprotocol/clientCapabilities; nil when absent or not one
	logLevel        mcp.LoggingLevel        // io.modelcontextprotocol/logLevel; "" when absent or not a string
}

// protocolPrefix starts the protocol's own _meta keys.
const protocolPrefix = "io.modelcontextprotocol/"

// UnmarshalJSON reads _meta, an object. encoding/json calls it with b
// valid JSON: it walks the object's members (eachMember) and decodes only
// the values it reads, each into its type; a member sent twice is read as
// the last one.
func (rm *requestMeta) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as encoding/json leaves a value for null
	}
	if mayOverflow(b) {
		// mcp.Meta refuses a _meta holding a number beyond float64 (its
		// map of every value cannot hold it).
		var all map[string]any
		if err := json.Unmarshal(b, &all); err != nil {
			return err
		}
	}
	*rm = requestMeta{}
	var members bool
	err := eachMember(b, func(key, val []byte) {
		switch string(key) {
		case "progressToken":
			decodeMember(val, &rm.progressToken)
			return
		case mcp.MetaKeyProtocolVersion:
			decodeMember(val, &rm.protocolVersion)
		case mcp.MetaKeyClientInfo:
			decodeMember(val, &rm.clientInfo)
		case mcp.MetaKeyClientCapabilities:
			decodeMember(val, &rm.caps)
		case mcp.MetaKeyLogLevel:
			decodeMember(val, &rm.logLevel)
		default:
			rm.others = rm.others || !bytes.HasPrefix(key, []byte(protocolPrefix))
		}
		members = true
	})
	if err != nil {
		return err
	}
	if members {
		rm.raw = bytes.Clone(b)
	}
	return nil
}

// decodeMember decodes val into *v, which it leaves zero when val is of
// another type.
func decodeMember[T any](val []byte, v *T) {
	var zero T
	*v = zero
	if json.Unmarshal(val, v) != nil {
		*v = zero
	}
}

// version is the protocol version the request declares; "" when none.
// rm may be nil.
func (rm *requestMeta) version() string {
	if rm == nil {
		return ""
	}
	return rm.protocolVersion
}

// fields returns the members as mcp.Meta's AdditionalFields holds them
// (every one but progressToken, decoded into any), without the protocol's
// own (io.modelcontextprotocol/...) when modern: a 2026-07-28 request's
// are its protocol information, not its tool's. It is nil when there are
// none, and when rm is nil. Each call decodes them afresh: the caller may
// keep or change the map.
func (rm *requestMeta) fields(modern bool) map[string]any {
	if rm == nil || rm.raw == nil || (modern && !rm.others) {
		return nil
	}
	var all map[string]any
	_ = json.Unmarshal(rm.raw, &all) // it decoded once (UnmarshalJSON)
	delete(all, "progressToken")
	if modern {
		for k := range all {
			if strings.HasPrefix(k, protocolPrefix) {
				delete(all, k)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	return all
}

// thread is the thread the request names (threadctx.MetaKey); "" when
// none, or not a string. rm may be nil.
func (rm *requestMeta) thread() string {
	name, _ := rm.fields(false)[threadctx.MetaKey].(string)
	return name
}

// eachMember calls fn with each member of obj, a JSON object that is
// valid JSON, in order: its key unquoted and its value as sent. It is an
// error for obj to be another JSON value.
func eachMember(obj []byte, fn func(key, val []byte)) error {
	i := skipSpace(obj, 0)
	if i == len(obj) || obj[i] != '{' {
		return errNotObject
	}
	for i = skipSpace(obj, i+1); obj[i] != '}'; {
		end := stringEnd(obj, i)
		key := obj[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			_ = json.Unmarshal(obj[i:end], &s) // a valid string
			key = []byte(s)
		}
		i = skipSpace(obj, skipSpace(obj, end)+1) // past the colon
		end = valueEnd(obj, i)
		fn(key, obj[i:end])
		if i = skipSpace(obj, end); obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return nil
}

var errNotObject = errors.New("_meta must be an object")

// skipSpace returns the index of the first byte of b from i that is not
// JSON white space (len(b) when none).
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index just past the valid JSON string starting at
// b[i].
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++ // the escaped byte, a quote perhaps
		}
	}
	return i + 1
}

// valueEnd returns the index just past the valid JSON value starting at
// b[i].
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i) - 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the object holding a number or literal
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// mayOverflow reports whether valid JSON b may hold a number beyond
// float64's range: one with an exponent, or of 309 digits or more. (It
// may also report a string that looks like one.)
func mayOverflow(b []byte) bool {
	digits := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if digits++; digits >= 309 {
				return true
			}
		case (c == 'e' || c == 'E') && digits > 0:
			return true
		case c != '.':
			digits = 0
		}
	}
	return false
}
