// Package reqmeta reads a request's params._meta once, with its message:
// the members the MCP front decides on (progress token, protocol version,
// client info and capabilities, log level), typed, and the object as sent
// for what is passed on (a tools/call's _meta to its tool, the trace
// context). It knows mcp-go's types and JSON, not the front or sessions.
package reqmeta

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/threadctx"
)

// Meta is a request's params._meta as the front reads it, decoded once
// with the message: the members the front decides on, typed, and the
// object as sent for what is passed on (a tools/call's _meta to its tool,
// the trace context). It reads what mcp.Meta and its accessors read
// (ProtocolVersion, ClientInfo, ClientCapabilities, LogLevel: a member
// that does not decode into its type is absent; a _meta mcp.Meta refuses
// is refused) without their map of every member, its values decoded into
// maps, and the re-encoding of each value an accessor reads.
type Meta struct {
	// raw is the object as sent; nil when it has no member but
	// progressToken.
	raw json.RawMessage
	// others: raw has a member neither progressToken nor the protocol's
	// own (io.modelcontextprotocol/...).
	others bool
	// ProgressToken is nil when absent (or null).
	ProgressToken mcp.ProgressToken
	// ProtocolVersion is io.modelcontextprotocol/protocolVersion; ""
	// when absent or not a string.
	ProtocolVersion string
	ClientInfo      *mcp.Implementation     // io.modelcontextprotocol/clientInfo; nil when absent or not one
	Caps            *mcp.ClientCapabilities // io.modelcontextprotocol/clientCapabilities; nil when absent or not one
	LogLevel        mcp.LoggingLevel        // io.modelcontextprotocol/logLevel; "" when absent or not a string
}

// protocolPrefix starts the protocol's own _meta keys.
const protocolPrefix = "io.modelcontextprotocol/"

// UnmarshalJSON reads _meta, an object. encoding/json calls it with b
// valid JSON: it walks the object's members (internal/jsonscan) and
// decodes only the values it reads, each into its type; a member sent
// twice is read as the last one.
func (rm *Meta) UnmarshalJSON(b []byte) error {
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
	*rm = Meta{}
	var members bool
	read := func(key, val []byte) {
		switch string(key) {
		case "progressToken":
			decodeMember(val, &rm.ProgressToken)
			return
		case mcp.MetaKeyProtocolVersion:
			decodeMember(val, &rm.ProtocolVersion)
		case mcp.MetaKeyClientInfo:
			decodeMember(val, &rm.ClientInfo)
		case mcp.MetaKeyClientCapabilities:
			decodeMember(val, &rm.Caps)
		case mcp.MetaKeyLogLevel:
			decodeMember(val, &rm.LogLevel)
		default:
			rm.others = rm.others || !bytes.HasPrefix(key, []byte(protocolPrefix))
		}
		members = true
	}
	s := jsonscan.New(b)
	if !s.Object(func(key []byte) bool {
		val, ok := s.Raw()
		if ok {
			read(key, val)
		}
		return ok
	}) {
		// A key with escapes or beyond ASCII, which jsonscan does not
		// read, or not an object: encoding/json reads it (a member sent
		// twice is its last there too).
		*rm, members = Meta{}, false
		var all map[string]json.RawMessage
		if json.Unmarshal(b, &all) != nil {
			return errNotObject // b is valid JSON
		}
		for k, v := range all {
			read([]byte(k), v)
		}
	}
	if members {
		rm.raw = bytes.Clone(b)
	}
	return nil
}

var errNotObject = errors.New("_meta must be an object")

// decodeMember decodes val into *v, which it leaves zero when val is of
// another type.
func decodeMember[T any](val []byte, v *T) {
	var zero T
	*v = zero
	if json.Unmarshal(val, v) != nil {
		*v = zero
	}
}

// Version is the protocol version the request declares; "" when none.
// rm may be nil.
func (rm *Meta) Version() string {
	if rm == nil {
		return ""
	}
	return rm.ProtocolVersion
}

// Fields returns the members as mcp.Meta's AdditionalFields holds them
// (every one but progressToken, decoded into any), without the protocol's
// own (io.modelcontextprotocol/...) when modern: a 2026-07-28 request's
// are its protocol information, not its tool's. It is nil when there are
// none, and when rm is nil. Each call decodes them afresh: the caller may
// keep or change the map.
func (rm *Meta) Fields(modern bool) map[string]any {
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

// Thread is the thread the request names (threadctx.MetaKey); "" when
// none, or not a string. rm may be nil.
func (rm *Meta) Thread() string {
	name, _ := rm.Fields(false)[threadctx.MetaKey].(string)
	return name
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
