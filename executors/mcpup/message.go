package mcpup

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/jsonscan"
)

// upMessage is one message an upstream sent its client, as decodeMessage
// read it: exactly one of its fields is set.
type upMessage struct {
	resp *transport.JSONRPCResponse // a response to one of toolgate's requests
	note *mcp.JSONRPCNotification   // a notification
	req  *transport.JSONRPCRequest  // a request of the upstream's
}

// message is what decodeMessage reads of a message's shape, in one
// decoding.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"` // decoded for a response only
}

// decodeMessage reads b, one message of an upstream's (a stdio line, an
// event's data, a response body), which must be valid JSON. The common
// message, a result of one of toolgate's requests, is scanned, not decoded
// (scanResponse), and its result is a slice of b; anything else is decoded
// for its shape, then as what it is. ok is false for what is no JSON-RPC
// message, which callers skip.
func decodeMessage(b []byte) (m upMessage, ok bool) {
	if sid, result, ok := scanResponse(b); ok {
		return upMessage{resp: &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(sid), Result: result}}, true
	}
	var shape message
	if len(b) == 0 || json.Unmarshal(b, &shape) != nil {
		return m, false
	}
	hasID := len(shape.ID) > 0 && string(shape.ID) != "null"
	switch {
	case shape.Method != "" && !hasID:
		var n mcp.JSONRPCNotification
		if json.Unmarshal(b, &n) != nil {
			return m, false
		}
		return upMessage{note: &n}, true
	case shape.Method != "":
		var req transport.JSONRPCRequest
		if json.Unmarshal(b, &req) != nil {
			return m, false
		}
		return upMessage{req: &req}, true
	}
	var id mcp.RequestId
	var e *mcp.JSONRPCErrorDetails
	if json.Unmarshal(shape.ID, &id) != nil || (shape.Error != nil && json.Unmarshal(shape.Error, &e) != nil) {
		return m, false
	}
	return upMessage{resp: &transport.JSONRPCResponse{JSONRPC: shape.JSONRPC, ID: id, Result: shape.Result, Error: e}}, true
}

// scanResponse reads the common message, a result of one of toolgate's
// requests (whose ids are strings), without decoding it: a JSON object
// whose members are "jsonrpc": "2.0", a string id of printable ASCII
// without escapes, and a result, each once, and others that a decoding
// ignores. It returns the id's text and the result, a slice of b. ok is
// false for anything else (an error, a method, a member given twice,
// another id), which decodeMessage decodes; b is valid JSON (the caller
// has checked it).
func scanResponse(b []byte) (id string, result json.RawMessage, ok bool) {
	s := jsonscan.New(b)
	var rawID []byte
	var version, seenID bool
	ok = s.Object(func(key []byte) bool {
		switch {
		case jsonscan.FoldEq(key, "jsonrpc"):
			v, ok := s.PlainString()
			if version || !ok || string(v) != mcp.JSONRPC_VERSION {
				return false
			}
			version = true
		case jsonscan.FoldEq(key, "id"):
			v, ok := s.PlainString()
			if seenID || !ok {
				return false
			}
			rawID, seenID = v, true
		case jsonscan.FoldEq(key, "result"):
			if result != nil {
				return false
			}
			v, ok := s.Raw()
			if !ok {
				return false
			}
			result = v[:len(v):len(v)]
		case jsonscan.FoldEq(key, "method"), jsonscan.FoldEq(key, "error"):
			return false
		default:
			return s.Value()
		}
		return true
	})
	if !ok || !s.Done() || !version || !seenID || result == nil {
		return "", nil, false
	}
	return string(rawID), result, true
}

// encodeAnswer encodes resp, toolgate's answer to a request of an
// upstream's. An answer that does not encode (a client's result that is
// not JSON) goes as an internal error instead: the upstream must not wait
// for one that never comes.
func encodeAnswer(resp *transport.JSONRPCResponse) []byte {
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(transport.NewJSONRPCErrorResponse(resp.ID, mcp.INTERNAL_ERROR, "toolgate could not encode the answer: "+err.Error(), nil))
	}
	return b
}
