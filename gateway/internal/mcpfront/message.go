package mcpfront

import (
	"bytes"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/gateway/internal/reqmeta"
)

// message is one JSON-RPC message as every transport of the front reads
// it: decoded once, its params left raw for whoever serves its method.
type message struct {
	raw    json.RawMessage // the message as sent
	id     json.RawMessage // compacted; nil when absent (a notification)
	method string          // "" for a response
	params json.RawMessage // nil when absent
	// response: the message has a result or an error and no method (the
	// client answering a request of the server's).
	response bool
	// call is a tools/call's params, decoded with the message; nil for
	// another method or params that do not decode.
	call *callParams
	// meta is params._meta (meta.go), decoded for a tools/call and when
	// the message may be of the 2026-07-28 era (it names the protocol
	// version key) or carry a trace context; nil otherwise.
	meta *reqmeta.Meta
}

// envelope is the shape a JSON-RPC message is decoded into.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// metaParams is what the front reads of any request's params: its _meta.
type metaParams struct {
	Meta *reqmeta.Meta `json:"_meta"`
}

// decodeMessage decodes raw, one JSON-RPC message (not a batch). On
// failure it returns the JSON-RPC error answering it, with the id when it
// could be read: -32700 for what is not JSON, -32600 for a message of the
// wrong shape (not an object, a jsonrpc other than "2.0", a method that is
// not a string, an id that is neither a string nor a number).
func decodeMessage(raw []byte) (m message, reject []byte) {
	var e envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		if !json.Valid(raw) {
			return m, jsonRPCError(mcp.PARSE_ERROR, "the message is not valid JSON: send one JSON-RPC message (an object) per request")
		}
		return m, jsonRPCError(mcp.INVALID_REQUEST, "the message is not a JSON-RPC message: send an object with jsonrpc, method and params (and id for a request)")
	}
	m.raw = raw
	if len(e.ID) > 0 && string(e.ID) != "null" {
		m.id = compact(e.ID)
		if c := m.id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
			return m, rpcError(nil, mcp.INVALID_REQUEST, "the id must be a string or a number (MCP: a string or an integer)", nil)
		}
	} else if e.ID != nil && len(e.Method) > 0 {
		return m, rpcError(nil, mcp.INVALID_REQUEST, `"id": null: give a request a string or integer id, or leave out the id member to send a notification`, nil)
	}
	if e.JSONRPC != mcp.JSONRPC_VERSION {
		return m, rpcError(m.id, mcp.INVALID_REQUEST, `the message must carry "jsonrpc": "2.0"`, nil)
	}
	if len(e.Method) > 0 {
		if plainString(e.Method) {
			m.method = string(e.Method[1 : len(e.Method)-1])
		} else if json.Unmarshal(e.Method, &m.method) != nil {
			return m, rpcError(m.id, mcp.INVALID_REQUEST, "the method must be a non-empty string", nil)
		}
		if m.method == "" {
			return m, rpcError(m.id, mcp.INVALID_REQUEST, "the method must be a non-empty string", nil)
		}
	} else if e.Result != nil || e.Error != nil {
		m.response = true
	} else {
		return m, rpcError(m.id, mcp.INVALID_REQUEST, "the message has neither a method nor a result or error", nil)
	}
	if len(e.Params) > 0 && string(e.Params) != "null" {
		m.params = e.Params
	}
	switch {
	case m.method == string(mcp.MethodToolsCall):
		var p callParams
		if m.params != nil && json.Unmarshal(m.params, &p) == nil {
			m.call, m.meta = &p, p.Meta
		}
	case bytes.Contains(m.params, []byte(mcp.MetaKeyProtocolVersion)) || bytes.Contains(m.params, traceparentKey):
		// The trace context in _meta makes the parent of any request's
		// span (trace.go), not only a tools/call's.
		var p metaParams
		if json.Unmarshal(m.params, &p) == nil {
			m.meta = p.Meta
		}
	}
	return m, nil
}

// traceparentKey marks params that may carry a W3C trace context in _meta.
var traceparentKey = []byte(`"traceparent"`)

// notification reports whether m is a notification: a method and no id.
func (m *message) notification() bool { return m.method != "" && m.id == nil }

// modern reports whether m declares, in its _meta, a protocol version of
// the 2026-07-28 era.
func (m *message) modern() bool { return mcp.IsModernProtocol(m.meta.Version()) }

// headerName is what m's Mcp-Name header must hold: a tools/call's tool
// name as decoded with the message; the name or uri of the params of a
// prompts/get or resources/read (and of a tools/call whose params did not
// decode as a whole), which only this reads. It is false when the params
// do not read, or the method has no name.
func (m *message) headerName() (string, bool) {
	if m.call != nil {
		return m.call.Name, true
	}
	return mcp.ExtractHeaderName(mcp.MCPMethod(m.method), m.params)
}

// compact returns b without insignificant white space (b itself when it
// has none).
func compact(b []byte) []byte {
	if !bytes.ContainsAny(b, " \t\r\n") {
		return b
	}
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// rpcError is the JSON-RPC error response to the request with id (null
// when id is nil: a message toolgate rejects before it can read its id)
// with code, message and, when not nil, data.
func rpcError(id json.RawMessage, code int, message string, data any) []byte {
	type errorObj struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errorObj        `json:"error"`
	}{mcp.JSONRPC_VERSION, id, errorObj{code, message, data}})
	if err != nil {
		// Unreachable: id is nil or a valid JSON value taken from the
		// request, and data is built by toolgate.
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return b
}

// jsonRPCError is the JSON-RPC error response with a null id.
func jsonRPCError(code int, message string) []byte { return rpcError(nil, code, message, nil) }

// response is the JSON-RPC response of id with result, raw JSON (an
// upstream's result as it came, or one the front encoded), compacted: a
// newline in it would split an event. extra, when not nil, is members
// (each after a comma) added to result, which must then be an object with
// members of its own. It is nil when result is not JSON, or not such an
// object and extra is not nil.
func response(id, result, extra json.RawMessage) []byte {
	b := bytes.NewBuffer(make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result)+len(extra)))
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"result":`)
	if json.Compact(b, result) != nil {
		return nil
	}
	if extra != nil {
		out := b.Bytes()
		if n := len(out); out[n-1] != '}' || out[n-2] == '{' {
			return nil
		}
		b.Truncate(b.Len() - 1)
		b.Write(extra)
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes()
}

// answer is what the front answers one message with: the JSON-RPC
// response (nil for none) and, for an error, its code.
type answer struct {
	body []byte
	code int // the JSON-RPC error code; 0 for a result
}

func errorAnswer(id json.RawMessage, code int, msg string, data any) answer {
	return answer{body: rpcError(id, code, msg, data), code: code}
}
